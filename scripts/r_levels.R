# The level order of the factors of lme4's example data, as R has them (lme4 1.1-31):
# crossed's load_dataset() gives these columns as pandas Categoricals in this order, so that
# ranef(), coefficient names and reference levels read as on lme4's own data.
# Usage: Rscript scripts/r_levels.R > src/crossed/data/levels.json
suppressMessages(library(lme4))
out <- list()
for (nm in c("sleepstudy", "Penicillin", "Dyestuff", "InstEval", "cbpp", "grouseticks")) {
  d <- get(nm)
  f <- Filter(is.factor, d)
  out[[nm]] <- lapply(f, levels)
}
cat(jsonlite::toJSON(out, auto_unbox = FALSE, pretty = FALSE), "\n")
