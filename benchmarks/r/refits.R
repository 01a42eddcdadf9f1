# The R side of benchmarks/bench_refits.py: refits per second of lme4's bootMer and of
# simr's powerSim loop, one core.
#
# Usage:
#   Rscript benchmarks/r/refits.R CASE NSIM RESULT.json
#     CASE: "sleepstudy" (Reaction ~ Days + (Days | Subject), test of Days) or "ccmem"
#     (blurb_like: score ~ seed + lr + batch_size + num_epochs + (1 | model) +
#     (1 | dataset) + (1 | model:dataset), test of seed20), with the data file as argument 4.
#   bootMer: lme4::bootMer(fit, fixef, nsim, type = "parametric").
#   power: simr's powerSim loop written out (simr is not packaged for Debian): per
#     simulation simulate(fit), lme4::refit(fit, y) and lmerTest's Satterthwaite t test of
#     the coefficient, as simr's default test of a fixed effect in an lmer fit does.
# RESULT.json: elapsed and CPU seconds of each loop (packages loaded, data read and one
# warm-up fit before timing), nsim, versions.

args <- commandArgs(trailingOnly = TRUE)
case <- args[1]
nsim <- as.integer(args[2])
out_file <- args[3]
data_file <- args[4]
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})
if (case == "sleepstudy") {
  data <- read.csv(data_file, colClasses = c(Subject = "character"))
  form <- Reaction ~ Days + (Days | Subject)
  term <- "Days"
} else if (case == "ccmem") {
  data <- read.csv(data_file, colClasses = c(model = "character", dataset = "character",
                                             seed = "character", lr = "character",
                                             batch_size = "character"))
  data$seed <- relevel(factor(data$seed), ref = "59")
  data$lr <- relevel(factor(data$lr), ref = "5e-5")
  data$batch_size <- relevel(factor(data$batch_size), ref = "32")
  form <- score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) +
    (1 | model:dataset)
  term <- "seed20"
} else {
  stop("CASE must be 'sleepstudy' or 'ccmem'")
}
fit <- lme4::lmer(form, data)
invisible(summary(lmerTest::as_lmerModLmerTest(fit)))  # warm-up
timed <- function(expr) {
  t0 <- proc.time()
  force(expr)
  tt <- proc.time() - t0
  list(elapsed = tt[["elapsed"]], cpu = tt[["user.self"]] + tt[["sys.self"]])
}
set.seed(1)
boot <- timed(suppressMessages(suppressWarnings(
  lme4::bootMer(fit, fixef, nsim = nsim, type = "parametric"))))
set.seed(2)
power <- timed({
  p <- numeric(nsim)
  for (j in seq_len(nsim)) {
    y <- simulate(fit)[[1]]
    m <- suppressMessages(suppressWarnings(lme4::refit(fit, y)))
    p[j] <- summary(lmerTest::as_lmerModLmerTest(m))$coefficients[term, "Pr(>|t|)"]
  }
  p
})
res <- list(case = case, nsim = nsim, bootMer = boot, powerSim = power,
            versions = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                            lmerTest = as.character(packageVersion("lmerTest"))))
jsonlite::write_json(res, out_file, auto_unbox = TRUE, digits = NA)
