"""Context sampling, UDCG_theta fitting (pairwise hinge SVM-rank as a LightningModule) and gamma calibration.

Modules: :mod:`~udcg_ltr.fit.sampling` (balanced contexts), :mod:`~udcg_ltr.fit.pairs` (context table,
Eq. 3 features, within-query pairs), :mod:`~udcg_ltr.fit.svmrank` (the LightningModule),
:mod:`~udcg_ltr.fit.reference` (scikit-learn LinearSVC reference), :mod:`~udcg_ltr.fit.theta`
(fitting entry points), :mod:`~udcg_ltr.fit.weights` (UDCGThetaWeights: score, save, load, plot),
:mod:`~udcg_ltr.fit.gamma` (gamma grid search) and :mod:`~udcg_ltr.fit.synthetic` (a seeded
generative world for benches and tests). Import from the modules (torch / Lightning load only with svmrank).
"""
