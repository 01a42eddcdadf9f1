# Reference values for tests/display/test_apa.py: the numbers an APA write-up of these
# fits prints, from lmerTest 3.1-3 / lme4 1.1-31 / emmeans / effectsize (R 4.2.2).
# Run from the repository root:  Rscript tests/data/reference/apa/apa.R
suppressPackageStartupMessages({
  library(lmerTest); library(emmeans); library(effectsize); library(jsonlite)
})
emm_options(lmerTest.limit = 1e6, pbkrtest.limit = 0)
out <- list()

# LMM: ner_like (bundled with crossed), F test, partial eta^2, EMMs and Tukey pairs
ner <- read.csv("src/crossed/data/ner_like.csv", colClasses = c(model = "character",
                language = "character", seed = "character"))
ner$model <- factor(ner$model); ner$language <- factor(ner$language)
m <- lmer(f1 ~ model + (1 | language) + (1 | model:language), data = ner)
a <- anova(m, type = 3, ddf = "Satterthwaite")
e2 <- eta_squared(a, partial = TRUE, ci = 0.95, alternative = "two.sided")
e1 <- eta_squared(a, partial = TRUE, ci = 0.95, alternative = "greater")
em <- summary(emmeans(m, "model", lmer.df = "satterthwaite"))
pr <- summary(pairs(emmeans(m, "model", lmer.df = "satterthwaite")), infer = TRUE)
out$lmm <- list(
  anova = list(F = a$`F value`, num_df = a$NumDF, den_df = a$DenDF, p = a$`Pr(>F)`),
  eta2_two_sided = list(estimate = e2$Eta2_partial, low = e2$CI_low, high = e2$CI_high),
  eta2_greater = list(estimate = e1$Eta2_partial, low = e1$CI_low, high = e1$CI_high),
  emmeans = list(level = as.character(em$model), estimate = em$emmean,
                 low = em$lower.CL, high = em$upper.CL),
  pairs = list(contrast = as.character(pr$contrast), estimate = pr$estimate, se = pr$SE,
               df = pr$df, t = pr$t.ratio, p = pr$p.value, low = pr$lower.CL,
               high = pr$upper.CL))

# GLMM: cbpp, odds ratios with Wald intervals and z tests, Wald chi^2 of period
data(cbpp, package = "lme4")
g <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), data = cbpp,
           family = binomial)
cf <- coef(summary(g))
z <- qnorm(0.975)
idx <- 2:4
b <- fixef(g)[idx]; V <- as.matrix(vcov(g))[idx, idx]
chisq <- as.numeric(t(b) %*% solve(V) %*% b)
gem <- summary(emmeans(g, "period", type = "response"))
gpr <- summary(pairs(emmeans(g, "period"), type = "response"), infer = TRUE)
out$glmm <- list(
  term = rownames(cf)[idx], or = exp(cf[idx, 1]),
  or_low = exp(cf[idx, 1] - z * cf[idx, 2]), or_high = exp(cf[idx, 1] + z * cf[idx, 2]),
  z = cf[idx, 3], p = cf[idx, 4],
  wald = list(chisq = chisq, df = length(idx), p = pchisq(chisq, length(idx), lower.tail = FALSE)),
  emmeans = list(level = as.character(gem$period), prob = gem$prob, low = gem$asymp.LCL,
                 high = gem$asymp.UCL),
  pairs = list(contrast = as.character(gpr$contrast), ratio = gpr$odds.ratio, se = gpr$SE,
               z = gpr$z.ratio, p = gpr$p.value, low = gpr$asymp.LCL, high = gpr$asymp.UCL))
writeLines(toJSON(out, digits = NA, pretty = TRUE), "tests/data/reference/apa/apa.json")
