"""The verdict of a campaign's figures (service/campaigns/self_pause.py): which rate, its figures, its threshold."""

from service.campaigns.self_pause import Figures, Limits, verdict
from service.settings import Settings


def test_the_verdict_names_the_rate_its_figures_and_its_threshold() -> None:
    limits = Limits.of(
        Settings(
            pause_complaint_rate="0.3%", pause_hard_bounce_rate=2, pause_policy_rejection_rate=5, pause_min_sample=1000
        )
    )
    assert verdict(limits, Figures(delivered=2180, complained=9)) == (
        "complaint rate 0.41 % (9 of 2,180 delivered) over the 0.30 % threshold (EINMAL_PAUSE_COMPLAINT_RATE)"
    )
    assert verdict(limits, Figures(delivered=999, complained=900)) is None, "below the sample"
    assert verdict(limits, Figures(delivered=1000, complained=3)) is None, "at the threshold is not over it"
    assert verdict(limits, Figures(delivered=990, rejected=11, bounced=10)) == (
        "hard-bounce rate 2.10 % (21 of 1,001 delivered or rejected) over the 2.00 % threshold "
        "(EINMAL_PAUSE_HARD_BOUNCE_RATE)"
    )
    assert verdict(limits, Figures(delivered=900, refused=100)) == (
        "policy-rejection rate 10.00 % (100 of 1,000 attempts) over the 5.00 % threshold "
        "(EINMAL_PAUSE_POLICY_REJECTION_RATE)"
    )
    off = Settings(pause_complaint_rate="", pause_hard_bounce_rate=0, pause_policy_rejection_rate="0 %")
    assert verdict(Limits.of(off), Figures(delivered=10_000, refused=10_000, bounced=5_000, complained=5_000)) is None
