# Extra reference numbers from R for the inference tests of issue 3 (lmerTest 3.1-3,
# emmeans 1.8.4, effectsize 0.8.3, pbkrtest 0.5.2): Type II ANOVA, joint_tests, contrast
# methods and adjustments beyond Tukey/none, partial omega^2 and Cohen's f^2, ranova of a
# slope-only random term.
# usage (from the repository root):
#   Rscript tests/data/reference/extra/inference.R tests/data/reference/extra/inference.json
# Data read as tools/r_reference.R does (factor columns as character, then factor()).
suppressMessages({
  library(jsonlite); library(lme4); library(lmerTest); library(emmeans); library(effectsize)
})
emm_options(lmerTest.limit = 1e6, pbkrtest.limit = 5000)
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/reference/extra/inference.json"

read_case <- function(path, factors) {
  cc <- setNames(rep("character", length(factors)), factors)
  d <- read.csv(path, stringsAsFactors = FALSE, colClasses = cc)
  for (f in factors) d[[f]] <- factor(d[[f]])
  d
}
tab <- function(x) { x <- as.data.frame(x); x$term <- rownames(x); rownames(x) <- NULL; x }

cases <- list(
  list(name = "cake_split_plot", path = "tests/data/cake.csv", factors = c("recipe", "replicate"),
       formula = "angle ~ recipe * temp + (1 | recipe:replicate)", spec = "recipe"),
  list(name = "exist_multi_full", path = "src/crossed/data/exist_multi.csv",
       factors = c("language", "task", "mode", "architecture", "model"),
       formula = "delta ~ language * task * mode + (1 | architecture)", spec = "task"),
  list(name = "ham_crossed", path = "tests/data/ham.csv",
       factors = c("Consumer", "Product", "Information", "Gender"),
       formula = paste("Informed.liking ~ Product * Information * Gender + (1 | Consumer) +",
                       "(1 | Product:Consumer) + (1 | Information:Consumer)"),
       spec = "Product")
)
res <- list()
for (cs in cases) {
  d <- read_case(cs$path, cs$factors)
  m <- lmerTest::lmer(as.formula(cs$formula), data = d)
  r <- list(name = cs$name)
  r$anova2_satterthwaite <- tab(anova(m, type = 2))
  a3 <- anova(m, type = 3)
  r$omega2_two_sided <- cbind(term = rownames(a3), as.data.frame(
    F_to_omega2(a3[["F value"]], a3[["NumDF"]], a3[["DenDF"]], ci = 0.95, alternative = "two.sided")))
  r$f2_greater <- cbind(term = rownames(a3), as.data.frame(
    F_to_f2(a3[["F value"]], a3[["NumDF"]], a3[["DenDF"]], ci = 0.95, alternative = "greater")))
  for (df in c("satterthwaite", "kenward-roger")) {
    jt <- as.data.frame(joint_tests(m, lmer.df = df))
    r[[paste0("joint_", df)]] <- jt
    em <- emmeans(m, as.formula(paste("~", cs$spec)), lmer.df = df)
    for (adj in c("holm", "bonferroni", "sidak", "fdr")) {
      r[[paste0("pairs_", adj, "_", df)]] <- as.data.frame(summary(pairs(em, adjust = adj)))
    }
    r[[paste0("revpairs_", df)]] <- as.data.frame(summary(pairs(em, reverse = TRUE), infer = TRUE))
    r[[paste0("trt_", df)]] <- as.data.frame(summary(contrast(em, "trt.vs.ctrl"), infer = TRUE))
    r[[paste0("pairs_tukey_ci_", df)]] <- as.data.frame(summary(pairs(em), infer = TRUE))
  }
  res[[cs$name]] <- r
}
# ranova of a slope-only term: lmerTest replaces (0 + Days | Subject) by (1 | Subject)
d <- read_case("tests/data/sleepstudy.csv", "Subject")
m <- lmerTest::lmer(Reaction ~ Days + (0 + Days | Subject), data = d)
res$sleepstudy_slope_only <- list(formula = "Reaction ~ Days + (0 + Days | Subject)",
                                  ranova = tab(ranova(m)))
write_json(res, out, digits = NA, auto_unbox = TRUE, pretty = TRUE)
