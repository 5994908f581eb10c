"""Differential privacy for a site's records, and an audit of what a site releases.

What a site sends (soft labels on U, scalars, its deployed model's answers) is computed from
models fitted on its private records, so its guarantee is that of those fits, composed over
the run; everything computed from U and already-private outputs is post-processing
(docs/privacy.md). Modules:

- `settings`: the config's `privacy` section (`PrivacyConfig`), imports nothing optional;
- `accountant`: one `SiteAccountant` per site, composing its private fits with Google's
  dp-accounting (RDP or PLD) and refusing a fit that would exceed the budget;
- `dpsgd`: `DPSGDLearner`, DP-SGD through Opacus for torch learners;
- `aggregate`: `SubsampleAggregateLearner`, subsample-and-aggregate for any learner;
- `setup`: which mechanism each client gets, calibrated to the budget;
- `attack`: membership-inference statistics (AUC, TPR at low FPR, empirical ε);
- `audit` (experiment layer): the canary game on a whole federation.

opacus and dp-accounting are the optional extra `cosmosfl[privacy]`; nothing here imports
them until a mechanism or an accountant is used.
"""
