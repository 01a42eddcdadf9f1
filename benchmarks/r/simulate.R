# The R side of benchmarks/bench_simulate.py: lme4 + lmerTest + emmeans, one core.
#
# Usage:
#   Rscript benchmarks/r/simulate.R ablation DATA.csv KEEP.csv RESULT.json
#     KEEP.csv: one row per (fraction, rep), columns fraction, rep, then one 0/1 column per
#     data row (1 = kept). For each row the model
#     delta ~ language * task * mode + (1 | architecture) is fitted with lmerTest on the
#     kept rows, and the EMM contrast of language is tested with Satterthwaite df
#     (emmeans(fit, "language", lmer.df = "satterthwaite") |> pairs()).
#   Rscript benchmarks/r/simulate.R power DATA.csv Y.csv RESULT.json
#     Y.csv: one simulated response per column (crossed's draws). The CCMEM
#     score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) +
#     (1 | model:dataset) is fitted once, then refitted to each response (lme4's refit) and
#     the coefficient seed20 tested with Satterthwaite df (lmerTest's summary).
# RESULT.json: elapsed and CPU (user + system) seconds of the loop (packages loaded and data read before timing),
# and per task the p-value (NA when the fit failed or the contrast is not estimable).

args <- commandArgs(trailingOnly = TRUE)
mode <- args[1]
suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
  library(emmeans)
})
emm_options(lmerTest.limit = 1e6, pbkrtest.limit = 0)

if (mode == "ablation") {
  data <- read.csv(args[2], colClasses = c(architecture = "character", model = "character",
                                           language = "character", task = "character",
                                           mode = "character"))
  keep <- as.matrix(read.csv(args[3]))
  fractions <- keep[, 1]
  masks <- keep[, -(1:2), drop = FALSE]
  form <- delta ~ language * task * mode + (1 | architecture)
  invisible(lmerTest::lmer(form, data))  # warm-up
  p <- rep(NA_real_, nrow(masks))
  t0 <- proc.time()
  for (i in seq_len(nrow(masks))) {
    sub <- data[masks[i, ] == 1, ]
    p[i] <- tryCatch({
      fit <- suppressMessages(suppressWarnings(lmerTest::lmer(form, sub)))
      emm <- suppressMessages(emmeans(fit, "language", lmer.df = "satterthwaite"))
      s <- summary(pairs(emm))
      s$p.value[1]
    }, error = function(e) NA_real_)
  }
  tt <- proc.time() - t0
  out <- list(elapsed = tt[["elapsed"]], cpu = tt[["user.self"]] + tt[["sys.self"]],
              n = nrow(masks), fraction = fractions, p_value = p)
} else if (mode == "power") {
  data <- read.csv(args[2], colClasses = c(model = "character", dataset = "character",
                                           seed = "character", lr = "character",
                                           batch_size = "character"))
  data$seed <- relevel(factor(data$seed), ref = "59")
  data$lr <- relevel(factor(data$lr), ref = "5e-5")
  data$batch_size <- relevel(factor(data$batch_size), ref = "32")
  ys <- as.matrix(read.csv(args[3]))
  form <- score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) +
    (1 | model:dataset)
  fit <- lme4::lmer(form, data)
  invisible(summary(lmerTest::as_lmerModLmerTest(fit)))  # warm-up
  p <- rep(NA_real_, ncol(ys))
  t0 <- proc.time()
  for (j in seq_len(ncol(ys))) {
    p[j] <- tryCatch({
      m <- suppressMessages(suppressWarnings(lme4::refit(fit, ys[, j])))
      cf <- summary(lmerTest::as_lmerModLmerTest(m))$coefficients
      cf["seed20", "Pr(>|t|)"]
    }, error = function(e) NA_real_)
  }
  tt <- proc.time() - t0
  out <- list(elapsed = tt[["elapsed"]], cpu = tt[["user.self"]] + tt[["sys.self"]],
              n = ncol(ys), p_value = p)
} else {
  stop("mode must be 'ablation' or 'power'")
}
out$versions <- list(R = R.version.string,
                     lme4 = as.character(packageVersion("lme4")),
                     lmerTest = as.character(packageVersion("lmerTest")),
                     emmeans = as.character(packageVersion("emmeans")))
jsonlite::write_json(out, args[4], auto_unbox = TRUE, digits = NA, na = "null")
