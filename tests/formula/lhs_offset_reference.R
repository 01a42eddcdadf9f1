# R's numbers for tests/formula/test_lhs_offset.py (R 4.2.2, lme4 1.1-31):
#   Rscript tests/formula/lhs_offset_reference.R > tests/data/reference/lhs_offset.json
suppressMessages(library(lme4))
ss <- read.csv("tests/data/sleepstudy.csv")
cbpp <- read.csv("tests/data/glmm/cbpp.csv")
cbpp$period <- factor(cbpp$period); cbpp$herd <- factor(cbpp$herd)
lmms <- c(
  "Reaction - 100 ~ Days + (1|Subject)",
  "Reaction - Days ~ 1 + (1|Subject)",
  "log(Reaction) - 5 ~ Days + (1|Subject)",
  "Reaction * 2 ~ Days + (1|Subject)",
  "Reaction + Days ~ Days + (1|Subject)",
  "Reaction/2 - Days^2 ~ Days + (Days|Subject)",
  "log(Reaction, 2) - 8 ~ Days + (1|Subject)",
  "Reaction %/% 10 + Reaction %% 10 ~ Days + (1|Subject)",
  "Reaction ~ Days + offset(0.5 * Days) + (1|Subject)",
  "Reaction ~ Days + offset(2*Days) + (1|Subject)",
  "Reaction ~ Days + offset(Days/2) + (1|Subject)",
  "Reaction ~ Days + offset(Days^2 - 3) + offset(Days) + (1|Subject)"
)
glmms <- c(
  "cbind(incidence, size - incidence) ~ period + (1|herd)",
  "cbind(incidence, size - incidence) ~ period + offset(0.1 * as.numeric(period)) + (1|herd)"
)
num <- function(x) sprintf("%.17g", x)
out <- c()
for (f in lmms) {
  m <- lmer(as.formula(f), ss)
  out <- c(out, sprintf('  "%s": {"fixef": [%s], "criterion": %s}', f,
                        paste(num(fixef(m)), collapse = ", "), num(REMLcrit(m))))
}
for (f in glmms[1]) {
  m <- glmer(as.formula(f), cbpp, family = binomial)
  out <- c(out, sprintf('  "%s": {"fixef": [%s], "criterion": %s}', f,
                        paste(num(fixef(m)), collapse = ", "), num(deviance(m))))
}
cat("{\n", paste(out, collapse = ",\n"), "\n}\n", sep = "")
