# Reference values for fit.rePCA(), fit.all_fit() and cx.select_random() (issue 33).
# R 4.2.2, lme4 1.1-31, lmerTest 3.1-3. Run from this folder:
#   Rscript selection.R   (writes selection.json)
suppressMessages({library(lme4); library(jsonlite)})
d <- "../../"
sleep <- read.csv(file.path(d, "sleepstudy.csv"))
carrots <- read.csv(file.path(d, "carrots.csv"))
carrots$Consumer <- factor(carrots$Consumer); carrots$Product <- factor(carrots$Product)
carrots$Homesize <- factor(carrots$Homesize)
face <- read.csv(file.path(d, "face_slope_lmm.csv"))
cbpp <- read.csv(file.path(d, "../../src/crossed/data/cbpp.csv"))
cbpp$herd <- factor(cbpp$herd); cbpp$period <- factor(cbpp$period)

pca <- function(m) {
  s <- summary(rePCA(m))
  lapply(s, function(x) list(sd = unname(x$importance[1, ]),
                             proportion = unname(x$importance[2, ]),
                             cumulative = unname(x$importance[3, ])))
}
# unrounded proportions: summary.prcomp rounds to 5 digits, so also the raw sdev
raw <- function(m) lapply(rePCA(m), function(x) x$sdev)

m_sleep <- lmer(Reaction ~ Days + (Days | Subject), sleep)
m_face <- lmer(y ~ x + (1 + x | g), face)
m_carrots <- lmer(Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product),
                  carrots)
m_cbpp <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp,
                family = binomial)
cases <- list(sleepstudy = m_sleep, face_slope = m_face, carrots_two = m_carrots,
              cbpp = m_cbpp)
out <- list()
for (nm in names(cases)) {
  m <- cases[[nm]]
  # lme4 1.1-31's allFit(m) stops on its own table when optimx and dfoptim are missing
  # (a subscript bug in its filtering), so its loop is written out: update(m, control =
  # <each optimiser>) from the default start, as allFit does, for the optimisers installed
  meth <- list(bobyqa = c("bobyqa", ""), Nelder_Mead = c("Nelder_Mead", ""),
               nlminbwrap = c("nlminbwrap", ""),
               nloptwrap.NLOPT_LN_NELDERMEAD = c("nloptwrap", "NLOPT_LN_NELDERMEAD"),
               nloptwrap.NLOPT_LN_BOBYQA = c("nloptwrap", "NLOPT_LN_BOBYQA"))
  af <- lapply(meth, function(o) {
    ctrl <- if (isGLMM(m)) glmerControl(optimizer = o[1]) else lmerControl(optimizer = o[1])
    if (o[2] != "") ctrl$optCtrl <- list(algorithm = o[2])
    tryCatch(suppressWarnings(suppressMessages(update(m, control = ctrl))),
             error = function(e) e)
  })
  ok <- sapply(af, function(x) !inherits(x, "error"))
  sa <- list(llik = sapply(af[ok], function(x) as.numeric(logLik(x))),
             msgs = lapply(af[ok], function(x) x@optinfo$conv$lme4$messages))
  # the refit with the highest log-likelihood among those without convergence messages
  # (face_slope: nloptwrap's BOBYQA, lme4's default, stops at -37.524, the others at -37.186)
  clean <- names(af)[ok][sapply(sa$msgs, function(x) !any(grepl("converge", x)))]
  best <- af[[clean[which.max(sa$llik[clean])]]]
  out[[nm]] <- list(
    best = clean[which.max(sa$llik[clean])], best_theta = unname(getME(best, "theta")),
    best_repca = pca(best), best_repca_sdev = raw(best),
    formula = deparse1(formula(m)), singular = isSingular(m), theta = unname(getME(m, "theta")),
    criterion = if (isGLMM(m)) unname(deviance(m)) else -2 * as.numeric(logLik(m)),
    repca = pca(m), repca_sdev = raw(m),
    allfit = list(optimizer = names(sa$llik), llik = unname(sa$llik),
                  ok = unname(ok),
                  msgs = lapply(sa$msgs, function(x) if (is.null(x)) "" else paste(x, collapse = "; ")))
  )
}
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), "selection.json")

# ---- select_random(strategy = "lrt"): the models of each step, fitted by lme4, and the
# likelihood-ratio statistics between them (REML fits for LMMs, as lmerTest's ranova and
# buildmer; Laplace for the GLMM). Stored: -2 logLik of each model, in step order.
grouse <- read.csv(file.path(d, "../../src/crossed/data/grouseticks.csv"))
for (v in c("INDEX", "BROOD", "YEAR", "LOCATION")) grouse[[v]] <- factor(grouse[[v]])
m2ll <- function(m) -2 * as.numeric(logLik(m))
lrt <- list(
  sleepstudy = sapply(list(
    lmer(Reaction ~ Days + (1 + Days | Subject), sleep),
    lmer(Reaction ~ Days + (1 + Days || Subject), sleep),
    lmer(Reaction ~ Days + (1 | Subject), sleep)), m2ll),
  carrots_two = sapply(list(
    lmer(Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product), carrots),
    lmer(Preference ~ sens2 + Homesize + (1 + sens2 || Consumer) + (1 | Product), carrots),
    lmer(Preference ~ sens2 + Homesize + (1 | Consumer) + (1 | Product), carrots),
    lmer(Preference ~ sens2 + Homesize + (1 + sens2 || Consumer), carrots)), m2ll),
  # step 0, then the three candidates of step 1 (without LOCATION, BROOD, INDEX), then
  # step 2's candidates after LOCATION (without BROOD, without INDEX)
  grouseticks = sapply(list(
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD) + (1 | LOCATION), grouse,
          family = poisson),
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD), grouse, family = poisson),
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | LOCATION), grouse, family = poisson),
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | BROOD) + (1 | LOCATION), grouse, family = poisson),
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | INDEX), grouse, family = poisson),
    glmer(TICKS ~ YEAR + cHEIGHT + (1 | BROOD), grouse, family = poisson)), m2ll))
out$lrt <- lrt
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, pretty = TRUE), "selection.json")
