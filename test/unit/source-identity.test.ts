import { describe, expect, it } from 'vitest';
import { mariadbGtidContained, normalizeGtidSet } from '../../src/capture/position.ts';
import { SourceIdentityError } from '../../src/errors.ts';
import { classifyFailure } from '../../src/replicator/classify.ts';
import { identityProblem, type SourceIdentity } from '../../src/replicator/source-identity.ts';
import { recordSourceIdentitySql, resetCheckpointSqlText } from '../../src/sql/checkpoint.ts';

const now: SourceIdentity = { uuid: 'aaaa', gtidSet: 'aaaa:1-20', head: 'binlog.000003:900', mariadb: false };

describe('checkpoint server identity', () => {
  it('a resume on the same server with its history intact is allowed', () => {
    expect(identityProblem({ uuid: 'aaaa', gtidSet: 'aaaa:1-10', head: 'binlog.000002:500' }, now, 'binlog.000002:400', true)).toBeUndefined();
  });

  it('a checkpoint recorded before identities were kept is resumed (and recorded then)', () => {
    expect(identityProblem({}, now, 'binlog.000003:100', undefined)).toBeUndefined();
  });

  it('another server uuid is refused', () => {
    expect(identityProblem({ uuid: 'bbbb' }, now, 'binlog.000003:100', undefined)).toEqual({ kind: 'other-server' });
  });

  it('GTIDs the server had executed that are gone mean a reset', () => {
    expect(identityProblem({ uuid: 'aaaa', gtidSet: 'aaaa:1-30' }, now, 'binlog.000003:100', false)).toEqual({ kind: 'gtids-gone' });
  });

  it('a binlog head before the one recorded at the last start means a reset, also without GTIDs', () => {
    const reset = { ...now, gtidSet: undefined, head: 'binlog.000001:157' };
    expect(identityProblem({ uuid: 'aaaa', head: 'binlog.000004:10' }, reset, 'binlog.000001:100', undefined)).toEqual({ kind: 'head-went-back' });
  });

  it('a checkpoint past the head is refused', () => {
    expect(identityProblem({ uuid: 'aaaa' }, now, 'binlog.000003:901', undefined)).toEqual({ kind: 'checkpoint-past-head' });
    expect(identityProblem({ uuid: 'aaaa' }, now, 'binlog.000004:4', undefined)).toEqual({ kind: 'checkpoint-past-head' });
  });

  it('MariaDB GTID states compare per domain and server id', () => {
    expect(mariadbGtidContained('0-1-5', '0-1-7,0-2-3')).toBe(true);
    expect(mariadbGtidContained('0-1-5', '0-1-4')).toBe(false);
    expect(mariadbGtidContained('0-1-5', '')).toBe(false);
    expect(mariadbGtidContained('0-1-5', '0-3-9')).toBe(false);
    expect(mariadbGtidContained('', '0-3-9')).toBe(true);
  });

  it('MySQL GTID sets lose their line breaks', () => {
    expect(normalizeGtidSet('a:1-3,\nb:1-2')).toBe('a:1-3,b:1-2');
  });

  it('an identity refusal is permanent and named', () => {
    expect(classifyFailure(new SourceIdentityError('x', 'node-1', 'a', 'b'))).toEqual({
      kind: 'permanent',
      cause: 'checkpoint belongs to another server or binlog history',
    });
  });

  it('statements: identity recorded under the owner epoch; the reset statement forgets copy progress too', () => {
    expect(recordSourceIdentitySql('m')).toBe(
      'UPDATE `m`.`checkpoints` SET `source_uuid` = ?, `source_gtid_set` = ?, `source_head` = ? WHERE `source_id` = ? AND `worker` = 0 AND `owner_epoch` = ?',
    );
    expect(resetCheckpointSqlText('lww_meta', "node-1")).toBe(
      "DELETE FROM `lww_meta`.`checkpoints` WHERE `source_id` = 'node-1' OR `source_id` LIKE 'node-1#%'",
    );
  });
});
