"""Context sampling, UDCG_theta fitting (pairwise SVM-rank) and gamma calibration. Import from the modules:
torch / Lightning load only with :mod:`~udcg_ltr.fit.svmrank`."""
