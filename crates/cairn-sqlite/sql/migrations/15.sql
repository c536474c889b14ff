
ALTER TABLE runs ADD COLUMN debounce_key TEXT;
ALTER TABLE runs ADD COLUMN debounce_until INTEGER;
CREATE UNIQUE INDEX runs_debouncing ON runs(workflow, debounce_key)
    WHERE status = 'suspended' AND suspend_reason = 'debouncing';
