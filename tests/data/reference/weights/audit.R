# Consumers of a weighted lmer fit (lme4 1.1-31, lmerTest, emmeans, pbkrtest, performance,
# R 4.2.2): reference for tests/test_weights_consumers.py. Run from the repository root:
#   Rscript tests/data/reference/weights/audit.R
# sleepstudy with weights w = 1 + Days %% 3, offset off = 2 Days, a 3-level factor grp.
suppressPackageStartupMessages({library(lmerTest); library(jsonlite); library(emmeans);
  library(performance)})
s <- read.csv("tests/data/sleepstudy.csv")
s$Subject <- factor(s$Subject)
s$w <- 1 + (s$Days %% 3)
s$off <- 2 * s$Days
s$grp <- factor(c("a", "b", "c")[1 + s$Days %/% 4])
safe <- function(expr) tryCatch(expr, error = function(e) paste("ERROR:", conditionMessage(e)))
fw <- lmer(Reaction ~ Days + grp + (1 | Subject), s, weights = w)
fo <- lmer(Reaction ~ Days + grp + (1 | Subject), s, offset = off)
ff <- lmer(Reaction ~ Days + grp + offset(off) + (1 | Subject), s, weights = w)
nd <- data.frame(Days = c(1, 5, 9), grp = factor(c("a", "b", "c"), levels = c("a", "b", "c")),
                 Subject = factor(c("308", "309", "310")), off = c(10, 20, 30), w = 1)
ct <- coef(summary(fw))
ctk <- coef(summary(fw, ddf = "Kenward-Roger"))
a3 <- anova(fw)
a3k <- safe(anova(fw, ddf = "Kenward-Roger"))
em <- as.data.frame(emmeans(fw, ~grp, lmer.df = "satterthwaite"))
emk <- safe(as.data.frame(emmeans(fw, ~grp, lmer.df = "kenward-roger")))
emo <- as.data.frame(emmeans(fo, ~grp, lmer.df = "satterthwaite"))
emf <- as.data.frame(emmeans(ff, ~grp, lmer.df = "satterthwaite"))
r2 <- r2_nakagawa(fw)
ic <- icc(fw)
rv <- ranova(fw)
ml <- update(fw, REML = FALSE)
d1 <- drop1(fw)
lr <- anova(ml, update(ml, . ~ . - grp))
pr <- confint(fw, method = "profile", oldNames = FALSE)  # NB: lme4's fixed-effect
# profile intervals are far narrower than the Wald ones with weights (wrong): recorded only
st <- step(fw)
fs <- attr(st, "drop1")
res <- list(
  coef = list(estimate = unname(ct[, 1]), se = unname(ct[, 2]), df = unname(ct[, 3]),
              p = unname(ct[, 5])),
  coef_kr = list(se = unname(ctk[, 2]), df = unname(ctk[, 3])),
  anova = list(F = unname(a3[, "F value"]), df = unname(a3[, "DenDF"])),
  anova_kr = if (is.character(a3k)) a3k else list(F = unname(a3k[, "F value"]),
                                                  df = unname(a3k[, "DenDF"])),
  emmeans = list(emmean = em$emmean, se = em$SE, df = em$df),
  emmeans_kr = if (is.character(emk)) emk else list(emmean = emk$emmean, se = emk$SE,
                                                   df = emk$df),
  emmeans_offset_arg = list(emmean = emo$emmean, se = emo$SE),
  emmeans_offset_term = list(emmean = emf$emmean, se = emf$SE),
  r2 = list(marginal = unname(r2$R2_marginal), conditional = unname(r2$R2_conditional)),
  icc = list(adjusted = unname(ic$ICC_adjusted), unadjusted = unname(ic$ICC_unadjusted)),
  ranova = list(loglik = unname(rv[, "logLik"]), lrt = unname(rv[2, "LRT"])),
  drop1 = list(F = unname(d1[, "F value"])),
  lrt = list(chisq = unname(lr[2, "Chisq"]), loglik = unname(lr[, "logLik"])),
  confint_profile = list(lower = unname(pr[, 1]), upper = unname(pr[, 2]),
                         names = rownames(pr)),
  step = list(F = unname(fs[, "F value"]), den_df = unname(fs[, "DenDF"]),
              terms = rownames(fs), final_fixef = unname(fixef(get_model(st))),
              final_loglik = as.numeric(logLik(get_model(st)))),
  hatvalues_head = unname(head(hatvalues(fw), 6)),
  cooks_head = unname(head(cooks.distance(fw), 6)),
  pearson_head = unname(head(residuals(fw, type = "pearson"), 6)),
  scaled_head = unname(head(residuals(fw, scaled = TRUE), 6)),
  fitted_offset_head = unname(head(fitted(fo), 6)),
  predict_offset_arg = unname(predict(fo, newdata = nd)),
  predict_offset_arg_pop = unname(predict(fo, newdata = nd, re.form = NA)),
  predict_offset_arg_orig_pop = unname(head(predict(fo, re.form = NA), 6)),
  predict_offset_term = unname(predict(ff, newdata = nd)),
  predict_offset_term_pop = unname(predict(ff, newdata = nd, re.form = NA)),
  loglik_fw = as.numeric(logLik(fw)),
  ranef_head = unname(ranef(fw)$Subject[1:3, 1]),
  ranef_condsd_head = unname(sqrt(attr(ranef(fw, condVar = TRUE)$Subject, "postVar")[1, 1, 1:3])),
  coef_subject_head = unname(coef(fw)$Subject[1:3, 1]),
  offset_fit = list(df = unname(coef(summary(fo))[, 3]), se = unname(coef(summary(fo))[, 2]),
                    anova_F = unname(anova(fo)[, "F value"]),
                    r2_marginal = unname(r2_nakagawa(fo)$R2_marginal),
                    r2_conditional = unname(r2_nakagawa(fo)$R2_conditional),
                    ranova_loglik = unname(ranova(fo)[, "logLik"]),
                    pearson_head = unname(head(residuals(fo, type = "pearson"), 6)),
                    hatvalues_head = unname(head(hatvalues(fo), 6))))
writeLines(toJSON(res, digits = NA, auto_unbox = TRUE, pretty = TRUE),
           "tests/data/reference/weights/audit.json")
