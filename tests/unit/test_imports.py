"""A practitioner's import stays light: ``import dplib`` and ``import dplib.accounting`` load
neither torch, nor scikit-learn, nor matplotlib's pyplot (they load on first use)."""
import subprocess
import sys

import pytest

HEAVY = ("torch", "sklearn", "matplotlib.pyplot")


@pytest.mark.parametrize("statement", ["import dplib", "import dplib.accounting",
                                       "import dplib.mechanisms", "import dplib.reporting",
                                       "import dplib.deployments", "import dplib.synthetic",
                                       "import dplib.experiments",
                                       "import dplib.experiments.dpsgd_tables",
                                       "import dplib.experiments.mechanism_audits",
                                       "import dplib.experiments.distributed",
                                       "from dplib.accounting import RDPAccountant, PLDAccountant"])
def test_light_import(statement):
    code = f"{statement}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{statement!r} loaded {out.stdout.strip()}"


def test_topic_packages_load_on_first_use():
    code = ("import sys, dplib\nassert 'dplib.attacks' not in sys.modules\n"
            "dplib.attacks.roc\nassert 'dplib.attacks' in sys.modules\n"
            "print(sorted(n for n in dir(dplib) if not n.startswith('_'))[:3])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "accounting" in out.stdout
