# Reference numbers from R for confint / coef / icc / influence / residuals / anova(lmer, lm)
# / step (issue 18, section 1): lme4 1.1-31, lmerTest 3.1-3, performance (R 4.2.2).
# usage (from the repository root):
#   Rscript tests/data/reference/r_ci/r_ci.R tests/data/reference/r_ci/r_ci.json
# Data read as tools/r_reference.R does (factor columns as character, then factor()).
suppressMessages({
  library(jsonlite); library(lme4); library(lmerTest); library(performance)
})
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/reference/r_ci/r_ci.json"

read_case <- function(path, factors) {
  cc <- setNames(rep("character", length(factors)), factors)
  d <- read.csv(path, stringsAsFactors = FALSE, colClasses = cc)
  for (f in factors) d[[f]] <- factor(d[[f]])
  d
}
mat <- function(x) { x <- as.data.frame(as.matrix(x)); x$term <- rownames(x); rownames(x) <- NULL; x }
coefs <- function(m) lapply(coef(m), function(x) { x <- as.data.frame(x); x$level <- rownames(x); rownames(x) <- NULL; x })

cases <- list(
  list(name = "sleepstudy", path = "tests/data/sleepstudy.csv", factors = "Subject",
       formula = "Reaction ~ Days + (Days | Subject)", lm = "Reaction ~ Days", group = "Subject"),
  list(name = "penicillin", path = "tests/data/Penicillin.csv", factors = c("plate", "sample"),
       formula = "diameter ~ 1 + (1 | plate) + (1 | sample)", lm = "diameter ~ 1", group = "plate")
)
res <- list()
for (cs in cases) {
  d <- read_case(cs$path, cs$factors)
  m <- lme4::lmer(as.formula(cs$formula), data = d)
  r <- list(name = cs$name, formula = cs$formula)
  r$confint_wald <- mat(confint(m, method = "Wald"))
  r$confint_profile <- mat(confint(m, method = "profile"))
  r$confint_profile_90 <- mat(confint(m, method = "profile", level = 0.90))
  set.seed(1)
  r$confint_boot <- mat(confint(m, method = "boot", nsim = 500))
  r$coef <- coefs(m)
  ic <- performance::icc(m)
  r$icc <- list(adjusted = ic$ICC_adjusted, conditional = ic$ICC_conditional)
  icg <- performance::icc(m, by_group = TRUE)
  r$icc_by_group <- as.data.frame(icg)
  r$hatvalues <- unname(hatvalues(m))
  r$cooks <- unname(cooks.distance(m))
  r$resid_scaled <- unname(residuals(m, scaled = TRUE))
  r$resid_pearson <- unname(residuals(m, type = "pearson"))
  infl <- influence(m, groups = cs$group, data = d)
  r$influence_group <- cs$group
  r$influence_deleted <- as.character(infl$deleted)
  r$influence_fixef <- unname(as.data.frame(infl[[2]]))
  r$influence_cooks <- unname(cooks.distance(infl))
  # dfbetas.influence.merMod fails with a single fixed effect (non-conformable arrays)
  r$influence_dfbetas <- tryCatch(as.data.frame(dfbetas(infl)), error = function(e) NULL)
  r$influence_varcov <- as.data.frame(infl[[4]])
  if (cs$name == "penicillin") {  # one refit per observation (lme4's default groups)
    io <- influence(m, data = d)
    r$influence_obs_cooks <- unname(cooks.distance(io))
    r$influence_obs_fixef <- unname(io[[2]][, 1])
  }
  r$compare_lm <- as.data.frame(anova(m, lm(as.formula(cs$lm), data = d)))
  r$compare_lm_model <- rownames(anova(m, lm(as.formula(cs$lm), data = d)))
  res[[cs$name]] <- r
}
# profile intervals of a singular fit (SD profiled from its bound 0) and of || terms
d <- read_case("tests/data/Dyestuff2.csv", "Batch")
res$profile_extra$dyestuff2 <- list(formula = "Yield ~ 1 + (1 | Batch)", data = "Dyestuff2.csv",
  factors = "Batch", ci = mat(confint(lmer(Yield ~ 1 + (1 | Batch), data = d))))
d <- read_case("tests/data/sleepstudy.csv", "Subject")
res$profile_extra$sleepstudy_zerocorr <- list(formula = "Reaction ~ Days + (Days || Subject)",
  data = "sleepstudy.csv", factors = "Subject",
  ci = mat(confint(lmer(Reaction ~ Days + (Days || Subject), data = d))))
# lmerTest::step on the ham example of lmerTest's documentation
d <- read_case("tests/data/ham.csv", c("Consumer", "Product", "Information", "Gender"))
m <- lmerTest::lmer(Informed.liking ~ Product * Information * Gender + (1 | Consumer) +
                    (1 | Product:Consumer) + (1 | Information:Consumer), data = d)
st <- lmerTest::step(m)
tabr <- function(x) { x <- as.data.frame(x); x$term <- rownames(x); rownames(x) <- NULL; x }
res$step_ham <- list(random = tabr(st$random), fixed = tabr(st$fixed),
                     final = paste(deparse(formula(get_model(st)), width.cutoff = 500), collapse = ""),
                     fixef = as.list(fixef(get_model(st))))
# step with a droppable random slope: sleepstudy with a nuisance fixed covariate
d <- read_case("tests/data/sleepstudy.csv", "Subject")
d$noise <- sin(seq_len(nrow(d)))
m <- lmerTest::lmer(Reaction ~ Days * noise + (Days | Subject), data = d)
st <- lmerTest::step(m)
res$step_sleep <- list(random = tabr(st$random), fixed = tabr(st$fixed),
                       final = paste(deparse(formula(get_model(st)), width.cutoff = 500), collapse = ""))
writeLines(toJSON(res, digits = NA, auto_unbox = TRUE, na = "string", pretty = TRUE), out)
