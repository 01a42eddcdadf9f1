# Extra reference numbers from R (lme4 1.1-31) for the formula/design tests of issue 2.
# usage (from the repository root):
#   Rscript tests/data/reference/extra/extra.R tests/data/reference/extra/extra.json
# Data: tests/data/*.csv, src/crossed/data/*.csv (bundled tables) and the small CSVs beside
# this script (made by make_extra_data.py: theta_order.csv, synthetic;
# exist_multi_missing_cell.csv: exist_multi without language == "es" & task == "t3";
# sleepstudy_days2.csv: sleepstudy with Days2 = 2 * Days).
# Factor columns are read as character and turned into factors, as tools/r_reference.R does.
suppressMessages({ library(jsonlite); library(lme4); library(lmerTest) })
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/reference/extra/extra.json"

find_data <- function(file) {
  for (dir in c("tests/data", "src/crossed/data", "tests/data/reference/extra")) {
    p <- file.path(dir, file)
    if (file.exists(p)) return(p)
  }
  stop("no data file ", file)
}

read_case <- function(file, factors, levels = NULL, relevel = NULL, mutate = NULL) {
  cc <- setNames(rep("character", length(factors)), factors)
  d <- read.csv(find_data(file), stringsAsFactors = FALSE, colClasses = cc)
  for (f in factors) {
    d[[f]] <- if (!is.null(levels[[f]])) factor(d[[f]], levels = levels[[f]]) else factor(d[[f]])
  }
  for (f in names(relevel)) d[[f]] <- relevel(d[[f]], ref = relevel[[f]])
  for (e in mutate) d <- within(d, eval(parse(text = e)))
  d
}

tight <- lmerControl(optCtrl = list(xtol_abs = 1e-13, ftol_abs = 1e-15, xtol_rel = 0,
                                    ftol_rel = 0, maxeval = 1e6))

fit_entry <- function(file, factors, formula, reml = TRUE, levels = NULL, relevel = NULL,
                      mutate = NULL, control = lmerControl(), coefs = FALSE) {
  d <- read_case(file, factors, levels, relevel, mutate)
  msgs <- character()
  m <- withCallingHandlers(
    lme4::lmer(as.formula(formula), data = d, REML = reml, control = control),
    message = function(c) { msgs <<- c(msgs, conditionMessage(c)); invokeRestart("muffleMessage") },
    warning = function(c) { msgs <<- c(msgs, conditionMessage(c)); invokeRestart("muffleWarning") })
  X <- model.matrix(m)
  full <- colnames(attr(X, "col.dropped"))
  list(data = file, factors = factors, formula = formula, reml = reml,
       levels = levels, relevel = relevel, mutate = mutate,
       fixef_names = names(fixef(m)), fixef = unname(fixef(m)),
       se = unname(sqrt(diag(as.matrix(vcov(m))))),
       dropped = names(attr(X, "col.dropped")),
       theta_names = names(getME(m, "theta")), theta = unname(getME(m, "theta")),
       deviance = if (reml) unname(REMLcrit(m)) else deviance(m),
       sigma = sigma(m), nobs = nobs(m), ngrps = as.list(ngrps(m)),
       singular = isSingular(m), varcorr = as.data.frame(VarCorr(m)),
       messages = unique(c(msgs, m@optinfo$conv$lme4$messages)),
       coef_satterthwaite = if (coefs) {
         x <- as.data.frame(summary(as_lmerModLmerTest(m), ddf = "Satterthwaite")$coefficients)
         x$term <- rownames(x); rownames(x) <- NULL; x
       })
}

r <- list()
# 1. lme4's default optimum vs a tightly converged one (how exact is the reference itself?)
r$tight_carrots_slopes <- fit_entry("carrots.csv", c("Consumer", "Homesize"),
  "Preference ~ sens2 + Homesize + (1 + sens2 | Consumer)", control = tight, coefs = TRUE)
r$tight_blurb_ccmem_slopes <- fit_entry("blurb_like.csv", c("model", "dataset", "seed", "lr", "batch_size"),
  "score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) + (1 | model:dataset) + (0 + s20 + s47 + lr1 + lr2 + lr3 + lr4 + b16 + num_epochs || model:dataset)",
  relevel = list(seed = "59", lr = "5e-5", batch_size = "32"),
  mutate = c("s20 <- as.numeric(seed == '20')", "s47 <- as.numeric(seed == '47')",
             "lr1 <- as.numeric(lr == '1e-5')", "lr2 <- as.numeric(lr == '2e-5')",
             "lr3 <- as.numeric(lr == '3e-5')", "lr4 <- as.numeric(lr == '4e-5')",
             "b16 <- as.numeric(batch_size == '16')"), control = tight, coefs = TRUE)
r$tight_sleepstudy_ml <- fit_entry("sleepstudy.csv", "Subject",
  "Reaction ~ Days + (Days | Subject)", reml = FALSE, control = tight, coefs = TRUE)
r$tight_penicillin_crossed <- fit_entry("Penicillin.csv", c("plate", "sample"),
  "diameter ~ 1 + (1 | plate) + (1 | sample)", control = tight, coefs = TRUE)
r$tight_exist_mono_nested <- fit_entry("exist_mono.csv", c("language", "task", "mode", "architecture", "model"),
  "delta ~ language * task * mode + (1 | architecture/model)", control = tight, coefs = TRUE)
r$tight_ner_crossed <- fit_entry("ner_like.csv", c("model", "language", "seed"),
  "f1 ~ model + (1 | language) + (1 | model:language)", control = tight, coefs = TRUE)

# 2. theta order: lme4 sorts terms by number of levels (rev(order(nl))) only when some term
#    has more levels than the one before it; g1, g3, g4 have 5 levels, g2 has 10
to <- c("g1", "g2", "g3", "g4")
r$order_tie <- fit_entry("theta_order.csv", to, "y ~ 1 + (1 | g1) + (1 | g3)")
r$order_untied <- fit_entry("theta_order.csv", to, "y ~ 1 + (1 | g1) + (1 | g2) + (1 | g3)")
r$order_mixed <- fit_entry("theta_order.csv", to, "y ~ x + (1 | g1) + (x | g2) + (1 | g4) + (1 | g3)")
r$order_zerocorr <- fit_entry("theta_order.csv", to, "y ~ x + (x || g1) + (1 | g2)")
r$order_same_factor <- fit_entry("theta_order.csv", to, "y ~ x + (1 | g2) + (0 + x | g2) + (1 | g1)")
r$order_decreasing <- fit_entry("theta_order.csv", to, "y ~ x + (x | g2) + (1 | g1) + (1 | g3)")

# 3. || with a factor: lme4 keeps the factor's columns correlated; the explicit expansion
#    (one independent variance per indicator column, afex's expand_re) is what crossed fits
r$zerocorr_factor_explicit <- fit_entry("ham.csv", c("Consumer", "Product", "Information", "Gender"),
  "Informed.liking ~ Product + (1 + P2 + P3 + P4 || Consumer)",
  mutate = c("P2 <- as.numeric(Product == '2')", "P3 <- as.numeric(Product == '3')",
             "P4 <- as.numeric(Product == '4')"))
r$zerocorr_factor_lme4 <- fit_entry("ham.csv", c("Consumer", "Product", "Information", "Gender"),
  "Informed.liking ~ Product + (1 + Product || Consumer)")

# 4. fixed-part syntax
ss <- "Subject"
r$fixed_I_log <- fit_entry("sleepstudy.csv", ss, "log(Reaction) ~ Days + I(Days^2) + (1 | Subject)")
r$fixed_log_pred <- fit_entry("sleepstudy.csv", ss, "Reaction ~ log(Days + 1) + (1 | Subject)")
r$fixed_zero_plus <- fit_entry("sleepstudy.csv", ss, "Reaction ~ 0 + Days + (Days | Subject)")
r$fixed_minus_one <- fit_entry("sleepstudy.csv", ss, "Reaction ~ Days - 1 + (1 | Subject)")
em <- c("language", "task", "mode", "architecture", "model")
r$fixed_zero_plus_factor <- fit_entry("exist_multi.csv", em, "delta ~ 0 + language + task + (1 | architecture)")
r$fixed_term_order <- fit_entry("exist_multi.csv", em,
  "delta ~ language:task + mode + language + task + (1 | architecture)")
r$fixed_interaction_only <- fit_entry("exist_multi.csv", em, "delta ~ language:task + (1 | architecture)")
r$fixed_three_way <- fit_entry("exist_multi.csv", em, "delta ~ mode * task * language + (1 | architecture)")

# 5. reference levels: relevel() and factor(levels = ...) (pandas Categorical order)
r$reference_relevel <- fit_entry("exist_multi.csv", em, "delta ~ language * task + (1 | architecture)",
  relevel = list(language = "es", task = "t2"))
r$reference_levels <- fit_entry("exist_multi.csv", em, "delta ~ language * task + (1 | architecture)",
  levels = list(task = c("t3", "t1", "t2"), language = c("es", "en")))

# 6. rank deficiency: lme4 drops the same columns as crossed must
r$rank_days2 <- fit_entry("sleepstudy_days2.csv", ss, "Reaction ~ Days + Days2 + (1 | Subject)")
r$rank_nested_fixed <- fit_entry("exist_multi.csv", em, "delta ~ architecture + model + (1 | task)")
r$rank_missing_cell <- fit_entry("exist_multi_missing_cell.csv", em,
  "delta ~ language * task + (1 | architecture)")

# 7. grouping-factor names of nested and interaction terms (findbars + the fitted names)
r$nested_exist_mono <- fit_entry("exist_mono.csv", em, "delta ~ 1 + (1 | architecture/model)")
r$interaction_group <- fit_entry("Pastes.csv", c("batch", "cask", "sample"), "strength ~ 1 + (1 | batch:cask) + (1 | batch)")
# a/b with as many b:a levels as a levels (each architecture has one model): lme4 keeps its
# expansion order b:a, a (no reordering on ties)
r$nested_tied <- fit_entry("exist_multi.csv", em, "delta ~ 1 + (1 | architecture/model)")
r$nested_three <- fit_entry("theta_order.csv", to, "y ~ 1 + (1 | g1/g3/g4)")
r$tight_nested_three <- fit_entry("theta_order.csv", to, "y ~ 1 + (1 | g1/g3/g4)", control = tight)
r$findbars <- list(
  nested2 = sapply(findbars(y ~ (1 | a/b)), deparse),
  nested3 = sapply(findbars(y ~ (1 | a/b/c)), deparse),
  nested_inter = sapply(findbars(y ~ (1 | a:b/c)), deparse),
  several = sapply(findbars(y ~ x + (1 | a) + (0 + x | a) + (x || b)), deparse))

write_json(r, out, digits = NA, auto_unbox = TRUE, pretty = TRUE, null = "null")
cat("wrote", out, "\n")
