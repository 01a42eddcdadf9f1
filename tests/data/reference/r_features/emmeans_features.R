# Reference numbers from R for contrasts= and the emmeans features of issue 18.
# usage (from the repository root):
#   Rscript tests/data/reference/r_features/emmeans_features.R \
#       tests/data/reference/r_features/emmeans_features.json
# R 4.2.2, lme4 1.1-31, lmerTest 3.1-3, emmeans 1.8.4-1, effectsize.
# Data: tests/data/cake.csv (lme4's cake): `temperature` is read as an ordered factor
# (as in lme4::cake, so contr.poly by default), `temp` is its numeric value.
suppressMessages({ library(jsonlite); library(lme4); library(lmerTest); library(emmeans)
  library(effectsize) })
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/reference/r_features/emmeans_features.json"
emm_options(lmer.df = "satterthwaite")

cake <- read.csv("tests/data/cake.csv", stringsAsFactors = FALSE,
                 colClasses = c(replicate = "character", recipe = "character",
                                temperature = "character"))
cake$recipe <- factor(cake$recipe)
cake$replicate <- factor(cake$replicate)
tl <- as.character(sort(unique(as.numeric(cake$temperature))))
cake$temperature <- factor(cake$temperature, levels = tl, ordered = TRUE)
cake_u <- cake
cake_u$temperature <- factor(as.character(cake$temperature), levels = tl)

df_of <- function(x) { x <- as.data.frame(x); for (j in seq_along(x)) if (is.factor(x[[j]]))
  x[[j]] <- as.character(x[[j]]); x }

anova_tab <- function(fit, type) {
  a <- anova(fit, type = type)
  data.frame(term = rownames(a), sum_sq = a[["Sum Sq"]], num_df = a$NumDF, den_df = a$DenDF,
             statistic = a[["F value"]], p_value = a[["Pr(>F)"]])
}

contrast_case <- function(data, contrasts) {
  fit <- if (is.null(contrasts)) lmer(angle ~ recipe * temperature + (1 | recipe:replicate), data)
         else lmer(angle ~ recipe * temperature + (1 | recipe:replicate), data,
                   contrasts = contrasts)
  a3 <- anova(fit, type = 3)
  eta <- eta_squared(a3, partial = TRUE, ci = 0.95)
  list(contrasts = contrasts, fixef_names = names(fixef(fit)), fixef = unname(fixef(fit)),
       se = unname(sqrt(diag(as.matrix(vcov(fit))))), reml_crit = REMLcrit(fit),
       anova3 = anova_tab(fit, 3), anova1 = anova_tab(fit, 1), anova2 = anova_tab(fit, 2),
       anova3_kr = { a <- anova(fit, type = 3, ddf = "Kenward-Roger")
         data.frame(term = rownames(a), den_df = a$DenDF, statistic = a[["F value"]]) },
       eta2 = data.frame(term = eta$Parameter, eta2 = eta$Eta2_partial, ci_low = eta$CI_low,
                         ci_high = eta$CI_high),
       emm_temperature = df_of(summary(emmeans(fit, ~ temperature))),
       emm_recipe = df_of(summary(emmeans(fit, ~ recipe))),
       newdata_pred = unname(predict(fit, newdata = data[c(1, 50, 200), ], re.form = NA)))
}

res <- list()
res$contrasts <- list(
  poly_default = contrast_case(cake, NULL),
  sum_poly = contrast_case(cake, list(recipe = "contr.sum")),
  helmert_treatment = contrast_case(cake, list(recipe = "contr.helmert",
                                               temperature = "contr.treatment")),
  treatment = contrast_case(cake_u, NULL),
  sum_sum = contrast_case(cake_u, list(recipe = "contr.sum", temperature = "contr.sum")),
  poly_unordered = contrast_case(cake_u, list(temperature = "contr.poly")))

# an ordered factor in a random-effects term: lme4's mkReTrms codes it with contr.poly too
# (contrasts= applies to the fixed part only); sleepstudy, x = Days < 5 ("early"/"late")
ss <- read.csv("tests/data/sleepstudy.csv")
ss$Subject <- factor(ss$Subject)
ss$x <- factor(ifelse(ss$Days < 5, "early", "late"), levels = c("early", "late"),
               ordered = TRUE)
fr <- lmer(Reaction ~ x + (x | Subject), ss)
res$random_ordered <- list(formula = "Reaction ~ x + (x | Subject)",
  fixef_names = names(fixef(fr)), fixef = unname(fixef(fr)), theta = unname(getME(fr, "theta")),
  reml_crit = REMLcrit(fr), ranef_names = colnames(ranef(fr)$Subject),
  vc_names = as.data.frame(VarCorr(fr))$var1)

# ---------------------------------------------------------------- at / cov.reduce / by
fit2 <- lmer(angle ~ recipe * temp + (1 | recipe:replicate), cake)
sm <- function(x) df_of(summary(x))
res$at <- list(
  formula = "angle ~ recipe * temp + (1 | recipe:replicate)",
  default = sm(emmeans(fit2, ~ recipe)),
  at_avg = sm(emmeans(fit2, ~ recipe, at = list(temp = c(180, 220)))),
  at_by = sm(emmeans(fit2, ~ recipe | temp, at = list(temp = c(180, 220)))),
  at_by_pairs = sm(pairs(emmeans(fit2, ~ recipe | temp, at = list(temp = c(180, 220))))),
  at_by_kr = sm(emmeans(fit2, ~ recipe | temp, at = list(temp = c(180, 220)),
                        lmer.df = "kenward-roger")),
  cov_max = sm(emmeans(fit2, ~ recipe, cov.reduce = max)),
  cov_min = sm(emmeans(fit2, ~ recipe, cov.reduce = min)),
  cov_median = sm(emmeans(fit2, ~ recipe, cov.reduce = median)),
  cov_fn = sm(emmeans(fit2, ~ recipe, cov.reduce = function(x) quantile(x, 0.25))))

# ---------------------------------------------------------------- emtrends
fit3 <- lmer(angle ~ recipe * (temp + I(temp^2)) + (1 | recipe:replicate), cake)
res$emtrends <- list(
  formula = "angle ~ recipe * temp + (1 | recipe:replicate)",
  formula_quad = "angle ~ recipe * (temp + I(temp^2)) + (1 | recipe:replicate)",
  linear = sm(emtrends(fit2, ~ recipe, var = "temp")),
  linear_kr = sm(emtrends(fit2, ~ recipe, var = "temp", lmer.df = "kenward-roger")),
  linear_pairs = sm(pairs(emtrends(fit2, ~ recipe, var = "temp"))),
  overall = sm(emtrends(fit2, ~ 1, var = "temp")),
  quad = sm(emtrends(fit3, ~ recipe, var = "temp")),
  quad_at = sm(emtrends(fit3, ~ recipe | temp, var = "temp", at = list(temp = c(180, 220)))))

# ---------------------------------------------------------------- contrast methods
fit1 <- lmer(angle ~ recipe * temperature + (1 | recipe:replicate), cake)
e1 <- emmeans(fit1, ~ temperature)
set.seed(20261126)
ct <- function(...) sm(contrast(e1, ...))
res$methods <- list(
  formula = "angle ~ recipe * temperature + (1 | recipe:replicate)",
  pairwise = ct("pairwise"), revpairwise = ct("revpairwise"),
  trt_vs_ctrl = ct("trt.vs.ctrl"), trt_vs_ctrl_ref3 = ct("trt.vs.ctrl", ref = 3),
  trt_vs_ctrl_mvt = ct("trt.vs.ctrl", adjust = "mvt"),
  trt_vs_ctrlk = ct("trt.vs.ctrlk"),
  consec = ct("consec"), eff = ct("eff"), poly = ct("poly"),
  consec_none = ct("consec", adjust = "none"),
  consec_by = sm(contrast(emmeans(fit1, ~ temperature | recipe), "consec")),
  eff_recipe = sm(contrast(emmeans(fit1, ~ recipe), "eff")),
  mvt_confint = df_of(confint(contrast(e1, "consec"))))

# ---------------------------------------------------------------- type = "response"
fitl <- lmer(log(angle) ~ recipe + temperature + (1 | recipe:replicate), cake)
fits <- lmer(sqrt(angle) ~ recipe + temperature + (1 | recipe:replicate), cake)
el <- emmeans(fitl, ~ recipe)
es <- emmeans(fits, ~ recipe)
res$response <- list(
  formula_log = "log(angle) ~ recipe + temperature + (1 | recipe:replicate)",
  formula_sqrt = "sqrt(angle) ~ recipe + temperature + (1 | recipe:replicate)",
  log_link = sm(el), log_response = sm(emmeans(fitl, ~ recipe, type = "response")),
  log_pairs = sm(pairs(el, type = "response")),
  log_trt = sm(contrast(el, "trt.vs.ctrl", type = "response")),
  sqrt_response = sm(emmeans(fits, ~ recipe, type = "response")),
  sqrt_pairs = sm(pairs(es, type = "response")))

write_json(res, out, digits = NA, auto_unbox = TRUE, pretty = TRUE, na = "null")
