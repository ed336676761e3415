"""Imported first by the bench scripts: no hub downloads, W&B offline, quiet tokenizers and warnings.

The scripts run as ``python bench/<name>.py`` (this folder is then on ``sys.path``); ``udcg_ltr`` comes
from the editable install, or from the repository root added here for a plain checkout.
"""

import os
import sys
import warnings
from pathlib import Path

for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline",
                   "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))
warnings.filterwarnings("ignore")
