
CREATE TABLE IF NOT EXISTS rate_grants (bucket TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rate_grants_bucket ON rate_grants(bucket, at);
