# Time lme4::lmer on one benchmark case; called by benchmarks/run.py.
#
# Usage: Rscript benchmarks/r/fit_lmer.R SPEC.json RESULT.json
#
# SPEC.json (written by run.py): data (CSV path, may be gzipped), formula, factors (columns
# read as character), reference (reference level per factor, R's relevel), indicators
# (list of {name, column, level}: numeric 0/1 column name = (column == level)), repeat
# (number of timed fits), budget (stop repeating once the fits took this many seconds).
# lme4 is warmed up on sleepstudy first; the data are read before timing; each timed fit
# is the lme4::lmer call alone, measured with proc.time (elapsed, and user + system CPU).
# With spec$family (a GLMM case) the fit is lme4::glmer(form, data, family) and the
# criterion -2 logLik (Laplace).
# RESULT.json gets the times, the REML criterion, convergence, singularity, evaluation
# count, warnings, versions and the environment (R's BLAS and LAPACK, the load average
# before and after the fits).

args <- commandArgs(trailingOnly = TRUE)
spec <- jsonlite::fromJSON(args[1], simplifyVector = FALSE)
suppressPackageStartupMessages(library(lme4))

peak_rss_mb <- function() {
  status <- readLines("/proc/self/status")
  line <- grep("^VmHWM:", status, value = TRUE)
  as.numeric(gsub("[^0-9]", "", line)) / 1024
}

invisible(lmer(Reaction ~ Days + (Days | Subject), sleepstudy))

factors <- unlist(spec$factors)
col_classes <- setNames(rep("character", length(factors)), factors)
data <- read.csv(spec$data, colClasses = col_classes)
for (ind in spec$indicators) {
  data[[ind$name]] <- as.numeric(data[[ind$column]] == ind$level)
}
for (column in names(spec$reference)) {
  data[[column]] <- relevel(factor(data[[column]]), ref = spec$reference[[column]])
}
form <- as.formula(spec$formula)
rss_before <- peak_rss_mb()
load_average <- function() {
  as.numeric(strsplit(readLines("/proc/loadavg"), " ")[[1]][1:3])
}
load_before <- load_average()

times <- numeric(0)
cpu_times <- numeric(0)
messages <- character(0)
repeat {
  start <- proc.time()
  fit <- withCallingHandlers(
    if (is.null(spec$family)) lme4::lmer(form, data = data, REML = TRUE)
    else lme4::glmer(form, data = data, family = spec$family),
    warning = function(w) {
      messages <<- c(messages, conditionMessage(w))
      invokeRestart("muffleWarning")
    },
    message = function(m) {
      messages <<- c(messages, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  )
  used <- proc.time() - start
  times <- c(times, used[["elapsed"]])
  cpu_times <- c(cpu_times, used[["user.self"]] + used[["sys.self"]])
  if (length(times) >= spec$`repeat` || sum(times) >= spec$budget) break
}

# lme4 also lists "boundary (singular) fit" among these; only the others are failures
conv_messages <- as.character(fit@optinfo$conv$lme4$messages)
failed <- grepl("converge|unidentifiable|unable to evaluate|Hessian", conv_messages)
result <- list(
  times = I(times),
  cpu_times = I(cpu_times),
  criterion = if (is.null(spec$family)) REMLcrit(fit) else -2 * as.numeric(logLik(fit)),
  converged = fit@optinfo$conv$opt == 0 && !any(failed),
  singular = isSingular(fit),
  feval = fit@optinfo$feval,
  theta = I(unname(getME(fit, "theta"))),
  rss_before_fit_mb = rss_before,
  env = list(
    blas_text = sprintf("R's BLAS %s; LAPACK %s (Matrix %s: CHOLMOD for lme4)",
                        basename(extSoftVersion()[["BLAS"]]), basename(La_library()),
                        packageVersion("Matrix")),
    load = I(load_before),
    load_after = I(load_average())
  ),
  warnings = as.list(unique(trimws(c(messages, conv_messages)))),
  version = sprintf("lme4 %s (%s)", packageVersion("lme4"),
                    sub("R version ([0-9.]+).*", "R \\1", R.version.string))
)
jsonlite::write_json(result, args[2], auto_unbox = TRUE, digits = NA)
