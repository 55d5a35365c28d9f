"""The run folder: `FOLDER/EXPERIMENT/TRIAL`, on disk or in an object store.

Its layout and files (`rundir`), the checkpoints written and verified there (`checkpoint`), and
the storage behind it (`storage`, `storage_sync`).
"""
