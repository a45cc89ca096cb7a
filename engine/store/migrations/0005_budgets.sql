-- Budgets: a session pauses when its active CPU or its cost reaches them.
ALTER TABLE sessions ADD COLUMN cpu_budget INTEGER NOT NULL DEFAULT 0;  -- ns of CPU; 0 = none
ALTER TABLE sessions ADD COLUMN cost_budget REAL NOT NULL DEFAULT 0;    -- USD; 0 = none
