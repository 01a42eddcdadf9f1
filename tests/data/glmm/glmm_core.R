# Reference values for tests/model/glmm (glmm-core): lme4 1.1-31, R 4.2.2.
# Rscript tests/data/glmm/glmm_core.R  (run from the repository root)
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
out_dir <- "tests/data/glmm"
write.csv(cbpp, file.path(out_dir, "cbpp.csv"), row.names = FALSE)
write.csv(grouseticks, file.path(out_dir, "grouseticks.csv"), row.names = FALSE)
set.seed(17)
# a Poisson design with an offset (exposure), crossed groups
n <- 600
pois <- data.frame(site = factor(sample(sprintf("s%02d", 1:30), n, TRUE)),
                   month = factor(sample(sprintf("m%02d", 1:12), n, TRUE)),
                   x = round(rnorm(n), 3), exposure = round(runif(n, 0.5, 3), 3))
bs <- rnorm(30, 0, 0.4); bm <- rnorm(12, 0, 0.2)
pois$count <- rpois(n, pois$exposure * exp(0.3 + 0.5 * pois$x + bs[pois$site] + bm[pois$month]))
write.csv(pois, file.path(out_dir, "pois_offset.csv"), row.names = FALSE)
# a 0/1 design with a singular item variance (no item effect)
m <- 1200
bin <- data.frame(sys = factor(sample(c("A", "B", "C"), m, TRUE)),
                  item = factor(sample(sprintf("i%03d", 1:60), m, TRUE)),
                  grp = factor(sample(sprintf("g%d", 1:8), m, TRUE)))
bg <- rnorm(8, 0, 0.5)
bin$correct <- rbinom(m, 1, plogis(0.2 + c(A = 0, B = 0.4, C = -0.3)[as.character(bin$sys)] + bg[bin$grp]))
write.csv(bin, file.path(out_dir, "binary.csv"), row.names = FALSE)

# a singular fit: a 0/1 design whose grouping factor grp has no effect (first seed found)
for (s in 1:200) {
  set.seed(1000 + s)
  m2 <- 600
  sing <- data.frame(sys = factor(sample(c("A", "B"), m2, TRUE)),
                     item = factor(sample(sprintf("i%02d", 1:40), m2, TRUE)),
                     grp = factor(sample(sprintf("g%d", 1:5), m2, TRUE)))
  bi <- rnorm(40, 0, 0.8)
  sing$correct <- rbinom(m2, 1, plogis(0.3 + 0.5 * (sing$sys == "B") + bi[sing$item]))
  if (isSingular(suppressMessages(glmer(correct ~ sys + (1 | item) + (1 | grp), sing, binomial)))) break
}
write.csv(sing, file.path(out_dir, "singular.csv"), row.names = FALSE)
# all-0 and all-1 items, and complete separation in a fixed effect
set.seed(5)
sep <- data.frame(cond = factor(rep(c("a", "b", "c"), each = 100)),
                  item = factor(rep(sprintf("i%02d", 1:20), 15)))
sep$y <- rbinom(300, 1, 0.5)
sep$y[sep$cond == "c"] <- 1
sep$y[sep$item == "i01" & sep$cond != "c"] <- 0
write.csv(sep, file.path(out_dir, "separation.csv"), row.names = FALSE)

one <- function(fit) {
  list(deviance = deviance(fit), loglik = as.numeric(logLik(fit)), aic = AIC(fit), bic = BIC(fit),
       beta = unname(fixef(fit)), beta_names = names(fixef(fit)),
       se = unname(sqrt(diag(as.matrix(vcov(fit))))),
       vcov = unname(as.matrix(vcov(fit))),
       theta = unname(getME(fit, "theta")), theta_names = names(getME(fit, "theta")),
       devcomp_dev = unname(fit@devcomp$cmp["dev"]),
       singular = isSingular(fit), messages = fit@optinfo$conv$lme4$messages,
       nobs = nobs(fit),
       fitted_head = unname(head(fitted(fit), 10)),
       resid_dev_head = unname(head(residuals(fit, type = "deviance"), 10)),
       resid_pear_head = unname(head(residuals(fit, type = "pearson"), 10)),
       resid_resp_head = unname(head(residuals(fit, type = "response"), 10)),
       resid_work_head = unname(head(residuals(fit, type = "working"), 10)),
       ranef_first = unname(head(ranef(fit, condVar = TRUE)[[1]][[1]], 5)),
       ranef_first_group = names(ranef(fit))[1],
       ranef_first_levels = head(rownames(ranef(fit)[[1]]), 5),
       ranef_first_sd = unname(head(sqrt(attr(ranef(fit, condVar = TRUE)[[1]], "postVar")[1, 1, ]), 5)),
       summary = paste(capture.output(print(summary(fit))), collapse = "\n"))
}
res <- list()
res$cbpp <- one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial))
cbpp$prop <- cbpp$incidence / cbpp$size
res$cbpp_prop <- one(glmer(prop ~ period + (1 | herd), cbpp, binomial, weights = size))
res$cbpp_agq9 <- one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial, nAGQ = 9))
res$cbpp_probit <- one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial(link = "probit")))
res$cbpp_cloglog <- one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial(link = "cloglog")))
res$cbpp_nagq0 <- one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial, nAGQ = 0))
gt <- grouseticks
res$grouse <- one(glmer(TICKS ~ YEAR + HEIGHT + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION), gt, poisson))
res$grouse_scaled <- one(glmer(TICKS ~ YEAR + scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION), gt, poisson))
res$pois_offset <- one(glmer(count ~ x + (1 | site) + (1 | month), pois, poisson, offset = log(exposure)))
res$pois_offset_formula <- one(glmer(count ~ x + offset(log(exposure)) + (1 | site) + (1 | month), pois, poisson))
res$pois_slope <- one(glmer(count ~ x + (1 + x | site) + (1 | month), pois, poisson,
                            offset = log(exposure)))
# correlated random slopes: on a later term (BROOD, the first, scalar), on the only term
res$grouse_slope <- one(glmer(TICKS ~ YEAR + cHEIGHT + (1 + cHEIGHT | LOCATION) + (1 | BROOD),
                              gt, poisson))
res$pois_slope_only <- one(glmer(count ~ x + (1 + x | site), pois, poisson,
                                 offset = log(exposure)))
res$binary_singular <- one(glmer(correct ~ sys + (1 | item) + (1 | grp), bin, binomial))
res$singular <- one(glmer(correct ~ sys + (1 | item) + (1 | grp), sing, binomial))
res$separation <- one(glmer(y ~ cond + (1 | item), sep, binomial))
res$cbpp_slope <- tryCatch(one(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, binomial,
                                    control = glmerControl(optimizer = "bobyqa"))), error = function(e) NULL)
writeLines(toJSON(res, digits = NA, auto_unbox = TRUE, pretty = TRUE), file.path(out_dir, "glmm_core.json"))
