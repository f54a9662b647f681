"""The cluster profile's settings: read from the environment, and the Celery options they give."""

from __future__ import annotations

import pytest

from nl2sql_assets.cluster.settings import ClusterSettings, cluster_profile


def test_no_profile_is_the_embedded_default_and_an_unknown_one_is_refused():
    assert cluster_profile({}) is None
    assert cluster_profile({"NL2SQL_PROFILE": "embedded"}) is None
    with pytest.raises(ValueError, match="expected 'cluster' or 'embedded'"):
        cluster_profile({"NL2SQL_PROFILE": "clutser"})


def test_a_key_prefix_isolates_every_celery_key_of_one_cluster():
    settings = cluster_profile({"NL2SQL_PROFILE": "cluster", "NL2SQL_CELERY_KEY_PREFIX": "team_a:"})
    assert settings is not None
    config = settings.celery_config()
    assert config["broker_transport_options"]["global_keyprefix"] == "team_a:"
    assert config["result_backend_transport_options"]["global_keyprefix"] == "team_a:"
    assert "global_keyprefix" not in ClusterSettings().celery_config()["broker_transport_options"]


@pytest.mark.parametrize(("visibility", "sweep"), [(10, 1), (600, 60), (3600, 60), (5, 1)])
def test_a_killed_workers_step_is_looked_for_every_tenth_of_the_visibility_timeout(visibility: int, sweep: int):
    options = ClusterSettings(visibility_timeout_s=visibility).celery_config()["broker_transport_options"]
    assert options["visibility_timeout"] == visibility
    assert options["unacked_restore_interval"] == sweep
    assert options["unacked_restore_throttle"] == 1  # every sweep really scans
