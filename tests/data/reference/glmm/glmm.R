# Reference values for GLMMs (issue 17) from R: lme4::glmer, emmeans, performance, lmerTest
# (only its Type II/III contrast matrices). Writes glmm.json next to this script and the data
# it simulates into tests/data/glmm/.
#
# usage (from the repository root):  Rscript tests/data/reference/glmm/glmm.R
#
# Versions used for the committed JSON: R 4.2.2, lme4 1.1-31, emmeans 1.8.4-1,
# performance 0.10.2, lmerTest 3.1-3 (recorded in the JSON under "versions").
#
# What each case records (names as in the JSON):
#   deviance        lme4's deviance(m) for a glmerMod (the Laplace/AGQ approximation of the
#                   *conditional* deviance: sum of squared deviance residuals + u'u + log|L|^2
#                   terms; NOT -2 logLik)
#   minus2loglik    -2 * logLik(m)   (the number anova() prints in its "deviance" column)
#   loglik, aic, bic, df (= npar), nobs, ngrps, singular (isSingular), nagq
#   beta, fixef_names, vcov (vcov(m): lme4's default, from the finite-difference Hessian
#                   of the deviance over (theta, beta) when use.hessian is TRUE)
#   theta, theta_names (getME(m, "theta")), varcorr (as.data.frame(VarCorr(m)))
#   coef            summary(m)$coefficients: Estimate, Std. Error, z value, Pr(>|z|)
#   ranef           first <= 10 levels per grouping factor: conditional modes (ranef) and
#                   conditional SDs (sqrt of the postVar diagonal, ranef(m, condVar=TRUE))
#   rows            0-based row indices; fitted_response (fitted(m)), eta (predict(m)),
#                   resid_deviance / resid_pearson / resid_response / resid_working at them
#   resid_sums      sum and sum of squares of each residual type over all rows
#   wald_type2/3    Wald chi-square per fixed term (intercept excluded), computed in base R:
#                   L = lmerTest:::get_contrasts_type2(m) / get_contrasts_type3(m) (the same
#                   hypothesis matrices lmerTest uses for an lmer fit, on the model's own
#                   contrasts: treatment unless the data say otherwise),
#                   chisq = (L b)' (L V L')^-1 (L b), Df = rank(L), p = pchisq(upper).
#                   For additive models Type II = Type III = joint Wald test of the term's
#                   columns; they differ once a term is contained in an interaction.
#   drop1           drop1(m, test = "Chisq"): npar, AIC, LRT, Pr(Chi) (marginality respected)
#   anova           anova(m_small, m) between two nested fits: npar, AIC, BIC, logLik,
#                   deviance (= -2 logLik), Chisq, Df, Pr(>Chisq)
#   emmeans         emmeans(m, spec, type = "response") summary: response-scale estimate
#                   (prob / rate), SE (delta method), asymp.LCL/UCL (back-transformed
#                   link-scale z intervals); emmeans_link: the same on the link scale
#   pairs           summary(pairs(emm), infer = TRUE) with emm on the response scale:
#                   odds.ratio / ratio (exp of link differences), SE (delta method),
#                   asymp.LCL/UCL, z.ratio and p.value on the link scale, Tukey adjustment
#   r2              performance::r2_nakagawa(m): conditional and marginal; for Poisson
#                   fits also the null model insight::null_model(m) refits (its intercept
#                   gives the distribution variance ln(1 + 1/exp(b0)); its -2 logLik and
#                   lme4's convergence messages, since that refit may stop early)
suppressMessages({
  library(jsonlite); library(lme4); library(emmeans); library(performance)
})
args <- commandArgs(trailingOnly = FALSE)
here <- dirname(normalizePath(sub("^--file=", "", args[grep("^--file=", args)])))
root <- normalizePath(file.path(here, "..", "..", "..", ".."))
datadir <- file.path(root, "tests", "data", "glmm")
dir.create(datadir, showWarnings = FALSE, recursive = TRUE)

tab <- function(x) {
  x <- as.data.frame(x)
  if (!is.null(rownames(x)) && !all(rownames(x) == as.character(seq_len(nrow(x)))))
    x$term <- rownames(x)
  rownames(x) <- NULL
  x
}

wald <- function(m, type) {
  Ls <- if (type == 2) lmerTest:::get_contrasts_type2(m) else lmerTest:::get_contrasts_type3(m)
  b <- fixef(m); V <- as.matrix(vcov(m))
  rows <- lapply(names(Ls), function(term) {
    L <- Ls[[term]]
    q <- qr(L)$rank
    Lb <- L %*% b
    chisq <- drop(t(Lb) %*% solve(L %*% V %*% t(L), Lb))
    data.frame(term = term, Chisq = chisq, Df = q, p = pchisq(chisq, q, lower.tail = FALSE))
  })
  out <- do.call(rbind, rows)
  names(out)[4] <- "Pr(>Chisq)"
  list(table = out, L = lapply(Ls, function(L) unname(as.matrix(L))))
}

resid_at <- function(m, rows) {
  r1 <- rows + 1
  list(
    rows = rows,
    fitted_response = unname(fitted(m)[r1]),
    eta = unname(predict(m)[r1]),
    resid_deviance = unname(residuals(m, type = "deviance")[r1]),
    resid_pearson = unname(residuals(m, type = "pearson")[r1]),
    resid_response = unname(residuals(m, type = "response")[r1]),
    resid_working = unname(residuals(m, type = "working")[r1])
  )
}

resid_sums <- function(m) {
  out <- list()
  for (ty in c("deviance", "pearson", "response", "working")) {
    r <- residuals(m, type = ty)
    out[[ty]] <- list(sum = sum(r), sumsq = sum(r^2))
  }
  out$fitted <- list(sum = sum(fitted(m)), sumsq = sum(fitted(m)^2))
  out
}

ranef_head <- function(m, k = 10) {
  re <- ranef(m, condVar = TRUE)
  lapply(names(re), function(g) {
    x <- re[[g]]; pv <- attr(x, "postVar")
    n <- min(k, nrow(x))
    list(group = g, levels = rownames(x)[seq_len(n)], terms = colnames(x),
         values = unname(as.matrix(x))[seq_len(n), , drop = FALSE],
         cond_sd = do.call(rbind, lapply(seq_len(n),
                                         function(i) sqrt(diag(as.matrix(pv[, , i]))))))
  })
}

emm_block <- function(m, spec, by = NULL, ...) {
  out <- list(spec = spec, by = by)
  emm <- emmeans(m, spec, by = by, type = "response", ...)
  out$emmeans <- tab(summary(emm, infer = TRUE))
  out$emmeans_link <- tab(summary(emmeans(m, spec, by = by, ...), infer = TRUE))
  pr <- pairs(emm)
  out$pairs <- tab(summary(pr, infer = TRUE))
  out$pairs_adjust <- "tukey"
  out
}

r2_block <- function(m) {
  r <- tryCatch(suppressWarnings(r2_nakagawa(m)), error = function(e) NULL)
  if (is.null(r) || all(is.na(unlist(r)))) return(NULL)
  out <- list(conditional = unname(r$R2_conditional), marginal = unname(r$R2_marginal))
  if (family(m)$family == "poisson") {  # the null model insight refits for ln(1 + 1/mu)
    n0 <- suppressWarnings(insight::null_model(m))
    out$null_model <- list(formula = paste(deparse(formula(n0)), collapse = " "),
                           intercept = unname(fixef(n0)[[1]]),
                           minus2loglik = -2 * as.numeric(logLik(n0)),
                           messages = n0@optinfo$conv$lme4$messages)
  }
  out
}

describe <- function(m, name, data_file, formula, family, link, extra = list(),
                     rows = NULL, wald_tests = TRUE) {
  n <- nobs(m)
  if (is.null(rows)) rows <- unique(c(0, 1, 2, n %/% 2, n - 1))
  vc <- as.data.frame(VarCorr(m))
  r <- list(name = name, data = data_file, formula = formula, family = family, link = link,
            nagq = m@devcomp$dims[["nAGQ"]],
            nobs = n, ngrps = as.list(ngrps(m)), singular = isSingular(m),
            deviance = deviance(m), minus2loglik = -2 * as.numeric(logLik(m)),
            loglik = as.numeric(logLik(m)), df = attr(logLik(m), "df"),
            aic = AIC(m), bic = BIC(m),
            theta = unname(getME(m, "theta")), theta_names = names(getME(m, "theta")),
            fixef_names = names(fixef(m)), beta = unname(fixef(m)),
            vcov = unname(as.matrix(vcov(m))), varcorr = vc,
            coef = tab(summary(m)$coefficients),
            optimizer_messages = m@optinfo$conv$lme4$messages,
            optimizer_warnings = m@optinfo$warnings,
            ranef = ranef_head(m), resid = resid_at(m, rows), resid_sums = resid_sums(m))
  if (wald_tests) {
    w2 <- wald(m, 2); w3 <- wald(m, 3)
    r$wald_type2 <- w2$table; r$wald_type3 <- w3$table
    r$wald_type3_L <- w3$L; r$wald_type2_L <- w2$L
  }
  r$r2 <- r2_block(m)
  c(r, extra)
}

cases <- list()
t_all <- proc.time()[["elapsed"]]

## 1. cbpp: binomial with trials ------------------------------------------------------------
data(cbpp, package = "lme4")
write.csv(cbpp, file.path(datadir, "cbpp.csv"), row.names = FALSE)
f_cbpp <- "cbind(incidence, size - incidence) ~ period + (1 | herd)"
m_cbpp <- glmer(as.formula(f_cbpp), data = cbpp, family = binomial)
m_cbpp0 <- glmer(cbind(incidence, size - incidence) ~ 1 + (1 | herd), data = cbpp,
                 family = binomial)
cases$cbpp <- describe(m_cbpp, "cbpp", "cbpp.csv", f_cbpp, "binomial", "logit", extra = list(
  drop1 = tab(drop1(m_cbpp, test = "Chisq")),
  anova = list(small = "cbind(incidence, size - incidence) ~ 1 + (1 | herd)",
               table = tab(anova(m_cbpp0, m_cbpp))),
  small_fit = list(deviance = deviance(m_cbpp0), loglik = as.numeric(logLik(m_cbpp0)),
                   beta = unname(fixef(m_cbpp0)), theta = unname(getME(m_cbpp0, "theta"))),
  emm = emm_block(m_cbpp, "period"),
  weights_form = list(
    note = "same model as incidence/size ~ period + (1|herd), weights = size",
    deviance = deviance(glmer(incidence / size ~ period + (1 | herd), data = cbpp,
                              weights = size, family = binomial)))))

## 2. cbpp, nAGQ = 9 --------------------------------------------------------------------
m_agq <- glmer(as.formula(f_cbpp), data = cbpp, family = binomial, nAGQ = 9)
cases$cbpp_agq9 <- describe(m_agq, "cbpp_agq9", "cbpp.csv", f_cbpp, "binomial", "logit",
                            extra = list(emm = emm_block(m_agq, "period")))

## 3. cbpp with probit and cloglog links --------------------------------------------------
for (lk in c("probit", "cloglog")) {
  m_l <- glmer(as.formula(f_cbpp), data = cbpp, family = binomial(link = lk))
  cases[[paste0("cbpp_", lk)]] <- describe(m_l, paste0("cbpp_", lk), "cbpp.csv", f_cbpp,
                                           "binomial", lk,
                                           extra = list(emm = emm_block(m_l, "period")))
}

## 4. grouseticks: Poisson, three crossed/nested factors ----------------------------------
data(grouseticks, package = "lme4")
gt <- grouseticks  # written as lme4 ships it (cHEIGHT: HEIGHT centred, not scaled)
write.csv(gt, file.path(datadir, "grouseticks.csv"), row.names = FALSE)
f_gt <- "TICKS ~ YEAR + scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION)"
m_gt <- glmer(as.formula(f_gt), data = gt, family = poisson)
m_gt0 <- glmer(TICKS ~ scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION),
               data = gt, family = poisson)
cases$grouseticks <- describe(m_gt, "grouseticks", "grouseticks.csv", f_gt, "poisson", "log",
  extra = list(
    drop1 = tab(drop1(m_gt, test = "Chisq")),
    anova = list(small = "TICKS ~ scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION)",
                 table = tab(anova(m_gt0, m_gt))),
    small_fit = list(deviance = deviance(m_gt0), loglik = as.numeric(logLik(m_gt0)),
                     beta = unname(fixef(m_gt0)), theta = unname(getME(m_gt0, "theta"))),
    emm = emm_block(m_gt, "YEAR")))

## 5. Poisson with an offset: errors per output, log(length) offset, system * task ---------
set.seed(20261126)
n_prompt <- 60
prompts <- data.frame(prompt = sprintf("p%02d", seq_len(n_prompt)),
                      task = rep(c("code", "prose"), each = n_prompt / 2),
                      u = rnorm(n_prompt, 0, 0.5))
sys_eff <- c(A = 0, B = -0.3, C = 0.25)
off <- expand.grid(rep = 1:2, system = names(sys_eff), prompt = prompts$prompt,
                   stringsAsFactors = FALSE)
off <- merge(off, prompts, by = "prompt")
off$length <- sample(50:500, nrow(off), replace = TRUE)
eta <- log(off$length / 100) + log(0.8) + sys_eff[off$system] +
  ifelse(off$task == "code", 0.2, 0) + ifelse(off$task == "code" & off$system == "C", -0.3, 0) +
  off$u
off$errors <- rpois(nrow(off), exp(eta))
off <- off[order(off$prompt, off$system, off$rep), c("prompt", "task", "system", "rep",
                                                     "length", "errors")]
off$log_length <- log(off$length)
rownames(off) <- NULL
write.csv(off, file.path(datadir, "errors_offset.csv"), row.names = FALSE)
f_off <- "errors ~ system * task + offset(log(length)) + (1 | prompt)"
m_off <- glmer(as.formula(f_off), data = off, family = poisson)
m_off_add <- glmer(errors ~ system + task + offset(log(length)) + (1 | prompt), data = off,
                   family = poisson)
m_off_arg <- glmer(errors ~ system * task + (1 | prompt), data = off, family = poisson,
                   offset = log(length))
cases$errors_offset <- describe(m_off, "errors_offset", "errors_offset.csv", f_off, "poisson",
  "log", extra = list(
    offset_note = "offset(log(length)) in the formula; offset_argument: offset = log(length)",
    offset_argument = list(deviance = deviance(m_off_arg), beta = unname(fixef(m_off_arg)),
                           theta = unname(getME(m_off_arg, "theta"))),
    drop1 = tab(drop1(m_off, test = "Chisq")),
    anova = list(small = "errors ~ system + task + offset(log(length)) + (1 | prompt)",
                 table = tab(anova(m_off_add, m_off))),
    small_fit = list(deviance = deviance(m_off_add), loglik = as.numeric(logLik(m_off_add)),
                     beta = unname(fixef(m_off_add)),
                     theta = unname(getME(m_off_add, "theta"))),
    emm_note = paste("emmeans' reference grid sets the offset at log(mean(length));",
                     "emm_offset0 uses offset = 0 (rates per unit length)"),
    emm = emm_block(m_off, "system"),
    emm_offset0 = emm_block(m_off, "system", offset = 0),
    emm_by = emm_block(m_off, "system", by = "task"),
    emm_additive = emm_block(m_off_add, "system")))

## 6. 0/1 items x systems, about 50k rows: correct ~ system + (1|item) + (1|dataset) ---------
set.seed(17)
n_sys <- 10; n_item <- 5000; n_ds <- 5
ability <- seq(-0.6, 0.6, length.out = n_sys)
items <- data.frame(item = sprintf("i%04d", seq_len(n_item)),
                    dataset = sprintf("d%d", rep(seq_len(n_ds), each = n_item / n_ds)),
                    difficulty = rnorm(n_item, 0, 1.2))
ds_eff <- setNames(rnorm(n_ds, 0, 0.4), sprintf("d%d", seq_len(n_ds)))
big <- expand.grid(system = sprintf("s%02d", seq_len(n_sys)), item = items$item,
                   stringsAsFactors = FALSE)
big <- merge(big, items, by = "item")
big$correct <- rbinom(nrow(big), 1,
                      plogis(0.3 + ability[match(big$system, sprintf("s%02d", seq_len(n_sys)))] -
                               big$difficulty + ds_eff[big$dataset]))
big <- big[order(big$item, big$system), c("item", "dataset", "system", "correct")]
rownames(big) <- NULL
gz <- gzfile(file.path(datadir, "items_systems.csv.gz"), "w")
write.csv(big, gz, row.names = FALSE); close(gz)
f_big <- "correct ~ system + (1 | item) + (1 | dataset)"
t0 <- proc.time()[["elapsed"]]
m_big <- glmer(as.formula(f_big), data = big, family = binomial)
fit_big_s <- proc.time()[["elapsed"]] - t0
m_big0 <- glmer(correct ~ 1 + (1 | item) + (1 | dataset), data = big, family = binomial)
cases$items_systems <- describe(m_big, "items_systems", "items_systems.csv.gz", f_big,
  "binomial", "logit", extra = list(
    fit_seconds = fit_big_s,
    anova = list(small = "correct ~ 1 + (1 | item) + (1 | dataset)",
                 table = tab(anova(m_big0, m_big))),
    small_fit = list(deviance = deviance(m_big0), loglik = as.numeric(logLik(m_big0)),
                     beta = unname(fixef(m_big0)), theta = unname(getME(m_big0, "theta"))),
    emm = emm_block(m_big, "system")))

## 7. a singular fit: 0/1 outcome, groups with no between-group variation -------------------
sing <- NULL
for (seed in 1:200) {
  set.seed(seed)
  d <- data.frame(group = sprintf("g%02d", rep(1:8, each = 25)),
                  cond = rep(c("ctl", "trt"), times = 100))
  d$y <- rbinom(nrow(d), 1, plogis(-0.2 + 0.5 * (d$cond == "trt")))
  m_s <- glmer(y ~ cond + (1 | group), data = d, family = binomial)
  if (isSingular(m_s) && getME(m_s, "theta")[[1]] == 0) { sing <- list(seed = seed, d = d, m = m_s); break }
}
write.csv(sing$d, file.path(datadir, "singular_cond.csv"), row.names = FALSE)
cases$singular <- describe(sing$m, "singular", "singular_cond.csv", "y ~ cond + (1 | group)",
  "binomial", "logit", extra = list(seed = sing$seed,
                                    glm_deviance = deviance(glm(y ~ cond, binomial, sing$d)),
                                    emm = emm_block(sing$m, "cond")))

out <- list(
  versions = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                  emmeans = as.character(packageVersion("emmeans")),
                  performance = as.character(packageVersion("performance")),
                  lmerTest = as.character(packageVersion("lmerTest"))),
  seconds = proc.time()[["elapsed"]] - t_all,
  cases = cases)
write_json(out, file.path(here, "glmm.json"), digits = NA, auto_unbox = TRUE, null = "null",
           na = "null", pretty = FALSE, matrix = "rowmajor")
cat("wrote", file.path(here, "glmm.json"), "\n")
