# Reference numbers from R for crossed.evaluation.adjusted (issue 5): adjusted means of the
# systems in a CCMEM (emmeans grand mean + conditional mode, conditional SE) and the
# model x dataset interaction modes.
# usage (from the repository root):
#   Rscript tests/data/reference/extra/adjusted.R tests/data/reference/extra/adjusted.json
# Data: src/crossed/data/blurb_like.csv; factor columns read as character, as
# tools/r_reference.R does (lme4 1.1-31, emmeans 1.8.4).
suppressMessages({ library(jsonlite); library(lme4); library(emmeans) })
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/reference/extra/adjusted.json"
factors <- c("model", "dataset", "seed", "lr", "batch_size")
cc <- setNames(rep("character", length(factors)), factors)
d <- read.csv("src/crossed/data/blurb_like.csv", stringsAsFactors = FALSE, colClasses = cc)
for (f in factors) d[[f]] <- factor(d[[f]])
fit <- lmer(score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) +
              (1 | model:dataset), data = d)
g <- summary(emmeans(fit, ~ 1))
re <- as.data.frame(ranef(fit, condVar = TRUE))
m <- re[re$grpvar == "model", ]
adj <- data.frame(level = as.character(m$grp), estimate = g$emmean + m$condval,
                  std_error = sqrt(g$SE^2 + m$condsd^2), population_mean = g$emmean,
                  conditional_mode = m$condval, cond_sd = m$condsd)
ia <- re[re$grpvar == "model:dataset", ]
inter <- data.frame(level = as.character(ia$grp), estimate = ia$condval, cond_sd = ia$condsd)
write_json(list(formula = deparse1(formula(fit)), grand_mean = g$emmean, grand_se = g$SE,
                adjusted_means = adj, interaction = inter),
           out, digits = NA, auto_unbox = TRUE, pretty = TRUE)
