# lmer with prior weights and offsets (lme4 1.1-31, R 4.2.2): reference for
# tests/model/test_weights.py. Run from the repository root:
#   Rscript tests/data/reference/weights/weights.R
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
s <- read.csv("tests/data/sleepstudy.csv")
s$Subject <- factor(s$Subject)
s$w <- 1 + (s$Days %% 3)          # positive weights, e.g. numbers of test items
s$off <- 2 * s$Days
one <- function(fit) list(
  crit = if (isREML(fit)) REMLcrit(fit) else deviance(fit),
  loglik = as.numeric(logLik(fit)), sigma = sigma(fit),
  beta = unname(fixef(fit)), se = unname(sqrt(diag(as.matrix(vcov(fit))))),
  theta = unname(getME(fit, "theta")), fitted_head = unname(head(fitted(fit), 5)),
  nobs = nobs(fit))
res <- list(
  reml = one(lmer(Reaction ~ Days + (Days | Subject), s, weights = w)),
  ml = one(lmer(Reaction ~ Days + (Days | Subject), s, weights = w, REML = FALSE)),
  offset = one(lmer(Reaction ~ Days + (1 | Subject), s, offset = off)),
  offset_formula_weights = one(lmer(Reaction ~ Days + offset(off) + (1 | Subject), s,
                                    weights = w)))
writeLines(toJSON(res, digits = NA, auto_unbox = TRUE, pretty = TRUE),
           "tests/data/reference/weights/weights.json")
