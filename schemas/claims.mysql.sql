-- batchguard_claim, MySQL 8 / MariaDB 10.5+ (SPEC 7.5): created by `batchguard store migrate`
-- (dropped and created again, so a migrate brings it up to date). One statement: no DELIMITER.
--
--   SELECT batchguard_claim(job, key, run_id, fence)   -- inside the job's own transaction
--
-- Refused (SQLSTATE 45000, the job rolls its transaction back) unless the run is its slot's
-- latest acquisition with this fence; else TRUE when this is the first claim of (job, key)
-- ever (the claim and its output row are written), FALSE when it was claimed before (nothing
-- written). A concurrent claim of the key in another open transaction waits for its row lock,
-- then answers FALSE if that one committed, TRUE if it rolled back. Under REPEATABLE READ the
-- check reads the transaction's snapshot: call it first in the transaction.
CREATE FUNCTION batchguard_claim(p_job VARCHAR(255), p_key TEXT, p_run_id VARCHAR(255), p_fence BIGINT)
RETURNS BOOLEAN
NOT DETERMINISTIC MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_slot VARCHAR(40) DEFAULT NULL;
    DECLARE v_at VARCHAR(40);
    DECLARE v_dup INT DEFAULT 0;
    DECLARE v_msg VARCHAR(128);
    DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
    SET v_slot = (SELECT s.scheduled_at FROM batchguard_slots s
                   WHERE s.job = p_job AND s.run_id = p_run_id LIMIT 1);
    IF v_slot IS NULL OR NOT EXISTS (SELECT 1 FROM batchguard_leases l
                                      WHERE l.run_id = p_run_id AND l.fence = p_fence) THEN
        SET v_msg = LEFT(CONCAT('batchguard: run ', p_run_id, ' (fence ', p_fence,
            ') is no longer its slot''s latest holder: claim of ', p_key, ' refused'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF p_key IS NULL OR CHAR_LENGTH(p_key) > 1024 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'batchguard: a claimed key is 1 to 1024 characters';
    END IF;
    SET v_at = DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ');
    INSERT INTO batchguard_claims (job, key_digest, output_key, run_id, fence, at)
    VALUES (p_job, UNHEX(SHA2(p_key, 256)), p_key, p_run_id, p_fence, v_at);
    IF v_dup = 1 THEN
        RETURN FALSE;
    END IF;
    INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at)
    VALUES (p_job, v_slot, p_run_id, p_key, v_at);
    RETURN TRUE;
END
