-- A cancel or pause that waits for the worker holding a run is one request with its reason
-- (`request`: 'cancel' or 'pause'; `request_reason`), in place of the flags `cancel_requested` and
-- `pause_requested` and of the reason a waiting cancel kept in `error` (which a park then
-- overwrote). A cancel outranks a pause, as the worker always did; an ended run keeps none.
ALTER TABLE {schema}.runs ADD COLUMN request TEXT, ADD COLUMN request_reason TEXT;
UPDATE {schema}.runs SET
        request = CASE WHEN cancel_requested THEN 'cancel' ELSE 'pause' END,
        request_reason = CASE
            WHEN NOT cancel_requested THEN 'paused by request'
            WHEN status IN ('pending', 'running', 'suspended') THEN coalesce(error, 'cancelled')
            ELSE 'cancelled' END,
        error = CASE WHEN cancel_requested AND status IN ('pending', 'running', 'suspended') THEN NULL ELSE error END
    WHERE (cancel_requested OR pause_requested)
      AND status NOT IN ('completed', 'failed', 'cancelled', 'continued');
ALTER TABLE {schema}.runs DROP COLUMN cancel_requested, DROP COLUMN pause_requested;
