# R's numbers on the "Coming from R" page (docs/coming-from-r.md), one dataset: lme4's
# sleepstudy (tests/data/sleepstudy.csv), with Days also cut into three blocks for the
# factor examples. Run from the repository root:
#   Rscript tests/data/reference/docs/coming_from_r.R
# R 4.2.2, lme4 1.1-31, lmerTest 3.1-3, pbkrtest, emmeans 1.8.4, effectsize, performance, boot.
suppressPackageStartupMessages({
  library(lme4); library(lmerTest); library(emmeans); library(effectsize)
  library(performance); library(jsonlite)
})
d <- read.csv("tests/data/sleepstudy.csv")
d$Subject <- factor(d$Subject)
d$block <- factor(ifelse(d$Days <= 2, "d0-2", ifelse(d$Days <= 5, "d3-5", "d6-9")))
out <- list(versions = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                            lmerTest = as.character(packageVersion("lmerTest")),
                            emmeans = as.character(packageVersion("emmeans"))))
m <- lmer(Reaction ~ Days + (Days | Subject), d)                 # lme4 (+ lmerTest)
out$REMLcrit <- REMLcrit(m)
out$fixef <- as.list(fixef(m))
vc <- as.data.frame(VarCorr(m))
out$sdcor <- vc$sdcor
co <- coef(summary(m))                                            # lmerTest: Satterthwaite
out$satterthwaite <- list(df = unname(co["Days", "df"]), t = unname(co["Days", "t value"]),
                          p = unname(co["Days", "Pr(>|t|)"]))
kr <- anova(m, ddf = "Kenward-Roger")                             # pbkrtest through lmerTest
out$kenward_roger <- list(F = kr[["F value"]], DenDF = kr[["DenDF"]], p = kr[["Pr(>F)"]])
ml <- update(m, REML = FALSE)
m0 <- update(ml, . ~ . - Days)
lrt <- anova(m0, ml)                                              # LRT, ML refits
out$lrt <- list(chisq = lrt$Chisq[2], df = lrt$Df[2], p = lrt[["Pr(>Chisq)"]][2])
rn <- ranova(m)
out$ranova <- list(LRT = rn$LRT[2], p = rn[["Pr(>Chisq)"]][2])
r2 <- r2_nakagawa(m)                                              # performance
out$r2 <- list(conditional = unname(r2$R2_conditional), marginal = unname(r2$R2_marginal))

mb <- lmer(Reaction ~ block + (1 | Subject), d)                    # a factor
a <- anova(mb)
out$anova_block <- list(F = a[["F value"]], NumDF = a$NumDF, DenDF = a$DenDF, p = a[["Pr(>F)"]])
emm <- summary(emmeans(mb, ~ block))                                 # emmeans
out$emmeans <- list(block = as.character(emm$block), emmean = emm$emmean, SE = emm$SE,
                    df = emm$df)
pr <- summary(pairs(emmeans(mb, ~ block)))
out$pairs <- list(contrast = as.character(pr$contrast), estimate = pr$estimate,
                  t.ratio = pr$t.ratio, p.value = pr$p.value)
es <- eta_squared(mb, partial = TRUE)                               # effectsize
out$eta_squared <- list(Eta2_partial = es$Eta2_partial, CI_low = es$CI_low)
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE),
           "tests/data/reference/docs/coming_from_r.json")
