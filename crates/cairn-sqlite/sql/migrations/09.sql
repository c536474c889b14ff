
ALTER TABLE runs ADD COLUMN continued_from TEXT;
ALTER TABLE runs ADD COLUMN continued_as TEXT;
