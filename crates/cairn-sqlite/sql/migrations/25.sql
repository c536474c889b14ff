-- A running run's head: what each of its steps moves (its journal's end, when it last changed,
-- and its recoveries in a row, which progress clears), in a narrow row of its own, so that a
-- step's append rewrites five columns and not the whole run row (SQLite writes a row's whole
-- record on any update). A claim makes a run's head; every change that takes the run off its
-- worker (an end, a suspension, a release, a park, an operator's pause or cancel, a claim after
-- its lease lapsed) folds the head back into `runs` and deletes it; reads fold it in. The epoch
-- is the claim's, so the append's check of the lease needs no read of `runs`.
-- `IF NOT EXISTS` and `OR IGNORE`: a file faked older by dropping later objects still opens.
CREATE TABLE IF NOT EXISTS run_heads (
    id TEXT PRIMARY KEY NOT NULL,
    epoch INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    recoveries INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO run_heads (id, epoch, last_seq, updated_at, recoveries)
    SELECT id, epoch, last_seq, updated_at, recoveries FROM runs WHERE status = 'running';
