# Reference values for the scales of GLMM EMMs (issue 34): emmeans' default (the link
# scale), type = "response" (probabilities / rates, odds / rate ratios) and regrid()
# (the response scale as a new linear grid: differences of probabilities / rates).
# Run from the repository root:  Rscript tests/data/reference/glmm/emm_scales.R
# Writes emm_scales.json next to this file. R 4.2.2, lme4 1.1-31, emmeans 1.8.4-1.
#
# Per case (``summary(..., infer = TRUE)`` of each, as data frames with emmeans' names):
#   link, link_pairs          emmeans(m, spec) and pairs() (Tukey): emmeans' default
#   response, response_pairs  emmeans(m, spec, type = "response") and pairs() (ratios)
#   regrid, regrid_pairs      regrid(emmeans(m, spec)) and pairs() (differences, Tukey)
#   printed                   the text emmeans prints for each of them (the notes below
#                             each table: scale, intervals, adjustment); for the
#                             contrasts, of summary(..., infer = TRUE) (crossed's contrast
#                             tables have intervals and tests)
# items_systems: lme4's fit of the 50,000-row item-level data takes ~13 min, so its grid is
# rebuilt with qdrg() from lme4's beta and vcov stored in glmm.json (glmm.R, case 6) with
# link = "logit"; the script checks that this grid reproduces glmm.json's link-scale EMMs.
suppressMessages({library(jsonlite); library(lme4); library(emmeans)})
args <- commandArgs(trailingOnly = FALSE)
here <- dirname(normalizePath(sub("^--file=", "", args[grep("^--file=", args)])))
root <- normalizePath(file.path(here, "..", "..", "..", ".."))
tab <- function(x) { x <- as.data.frame(x); rownames(x) <- NULL; x }
printed <- function(x) paste(capture.output(print(x)), collapse = "\n")
block <- function(e) {
  rg <- regrid(e)
  er <- update(e, type = "response")
  list(link = tab(summary(e, infer = TRUE)), link_pairs = tab(summary(pairs(e), infer = TRUE)),
       response = tab(summary(er, infer = TRUE)),
       response_pairs = tab(summary(pairs(er), infer = TRUE)),
       regrid = tab(summary(rg, infer = TRUE)),
       regrid_pairs = tab(summary(pairs(rg), infer = TRUE)),
       # crossed's contrast tables show intervals and tests, as infer = TRUE
       printed = list(link = printed(e), link_pairs = printed(summary(pairs(e), infer = TRUE)),
                      response = printed(er),
                      response_pairs = printed(summary(pairs(er), infer = TRUE)),
                      regrid = printed(rg),
                      regrid_pairs = printed(summary(pairs(rg), infer = TRUE))))
}
out <- list()

cbpp_m <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), data = cbpp,
                family = binomial)
out$cbpp <- c(list(formula = "cbind(incidence, size - incidence) ~ period + (1 | herd)",
                   spec = "period"), block(emmeans(cbpp_m, ~ period)))

gt <- read.csv(file.path(root, "tests", "data", "glmm", "grouseticks.csv"))
for (v in c("INDEX", "BROOD", "YEAR", "LOCATION")) gt[[v]] <- factor(gt[[v]])
gt_f <- "TICKS ~ YEAR + scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION)"
gt_m <- glmer(as.formula(gt_f), data = gt, family = poisson)
out$grouseticks <- c(list(formula = gt_f, spec = "YEAR"), block(emmeans(gt_m, ~ YEAR)))

ref <- fromJSON(file.path(here, "glmm.json"), simplifyVector = TRUE)$cases$items_systems
items <- read.csv(file.path(root, "tests", "data", "glmm", "items_systems.csv.gz"))
items$system <- factor(items$system)
V <- matrix(unlist(ref$vcov), length(ref$beta))
q <- qdrg(~ system, data = items, coef = ref$beta, vcov = V, df = Inf, link = "logit")
e_items <- emmeans(q, ~ system)
stopifnot(isTRUE(all.equal(summary(e_items)$emmean, ref$emm$emmeans_link$emmean,
                           tolerance = 1e-10)))
out$items_systems <- c(list(formula = ref$formula, spec = "system",
                            note = "qdrg() on lme4's beta and vcov from glmm.json"),
                       block(e_items))
out$versions <- list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                     emmeans = as.character(packageVersion("emmeans")))
writeLines(toJSON(out, digits = NA, auto_unbox = TRUE, null = "null", na = "null",
                  pretty = TRUE), file.path(here, "emm_scales.json"))
