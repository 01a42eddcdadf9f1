# Reference values for LmerControl(optimizer = "nelder_mead") and its rows in
# fit.all_fit() (issue 33): lme4's nloptwrap with NLopt's Nelder-Mead, i.e. allFit's
# "nloptwrap.NLOPT_LN_NELDERMEAD", refitted here on their own so that the GLMM's deviance()
# and every case's estimates are recorded (selection.json, written by selection.R, keeps
# only each refit's logLik; its values are not regenerated).
# R 4.2.2, lme4 1.1-31 (nloptwrap's defaults: xtol_abs = ftol_abs = 1e-8, maxeval = 1e5,
# nloptr's xtol_rel = 1e-4), nloptr 2.0.3. Run from this folder:
#   Rscript nelder_mead.R   (writes nelder_mead.json)
suppressMessages({library(lme4); library(jsonlite)})
d <- "../../"
sleep <- read.csv(file.path(d, "sleepstudy.csv"))
carrots <- read.csv(file.path(d, "carrots.csv"))
carrots$Consumer <- factor(carrots$Consumer); carrots$Product <- factor(carrots$Product)
carrots$Homesize <- factor(carrots$Homesize)
face <- read.csv(file.path(d, "face_slope_lmm.csv"))
cbpp <- read.csv(file.path(d, "../../src/crossed/data/cbpp.csv"))
cbpp$herd <- factor(cbpp$herd); cbpp$period <- factor(cbpp$period)

nm_lmm <- lmerControl(optimizer = "nloptwrap",
                      optCtrl = list(algorithm = "NLOPT_LN_NELDERMEAD"))
# glmerControl(optimizer = "nloptwrap") runs nloptwrap in both stages (nAGQ = 0, then Laplace)
nm_glmm <- glmerControl(optimizer = "nloptwrap",
                        optCtrl = list(algorithm = "NLOPT_LN_NELDERMEAD"))
fits <- list(
  sleepstudy = lmer(Reaction ~ Days + (Days | Subject), sleep, control = nm_lmm),
  face_slope = lmer(y ~ x + (1 + x | g), face, control = nm_lmm),
  carrots_two = lmer(Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product),
                     carrots, control = nm_lmm),
  cbpp = glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp,
               family = binomial, control = nm_glmm))
out <- lapply(fits, function(m) list(
  optimizer = m@optinfo$optimizer, algorithm = m@optinfo$control$algorithm,
  feval = m@optinfo$feval,
  # LMM: the REML criterion; GLMM: lme4's deviance() (the sum of squared deviance
  # residuals at the conditional modes), and -2 logLik for both
  criterion = if (isGLMM(m)) unname(deviance(m)) else unname(m@devcomp$cmp[["REML"]]),
  m2ll = -2 * as.numeric(logLik(m)),
  theta = unname(getME(m, "theta")), fixef = unname(fixef(m)),
  messages = paste(m@optinfo$conv$lme4$messages, collapse = "; ")))
# lme4's deviance() of a GLMM is not the criterion the optimisers minimise (-2 logLik, the
# Laplace deviance): it moves at first order with the estimates, so R's own refits spread
# in it (allFit's loop, as in selection.R)
meth <- list(bobyqa = c("bobyqa", ""), Nelder_Mead = c("Nelder_Mead", ""),
             nlminbwrap = c("nlminbwrap", ""),
             nloptwrap.NLOPT_LN_NELDERMEAD = c("nloptwrap", "NLOPT_LN_NELDERMEAD"),
             nloptwrap.NLOPT_LN_BOBYQA = c("nloptwrap", "NLOPT_LN_BOBYQA"))
out$cbpp$allfit_deviance <- lapply(meth, function(o) {
  ctrl <- glmerControl(optimizer = o[1])
  if (o[2] != "") ctrl$optCtrl <- list(algorithm = o[2])
  unname(deviance(update(fits$cbpp, control = ctrl)))
})
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), "nelder_mead.json")
