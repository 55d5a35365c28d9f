"""From a command line to a running experiment: the plan (`experiment`), the launch check
(`preflight`, `config_check`), cluster launches (`cluster_launch`, `cost`), watching a run
(`progress`, `progress_view`), stopping it (`stopping`) and `surreal eval` / `status`
(`evaluate`). Above it: only `surreal.cli` and population-based training (`surreal.pbt`)."""
