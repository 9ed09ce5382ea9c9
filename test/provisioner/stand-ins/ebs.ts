/**
 * The EBS direct APIs of the EC2 stand-in (https://docs.aws.amazon.com/ebs/latest/APIReference/), not
 * the real cloud: the REST-JSON calls that write a snapshot, answered on the EC2 stand-in's address
 * (a client points its EBS endpoint there too), with the documented request and response shapes:
 *   StartSnapshot      POST /snapshots  {VolumeSize, Timeout, ClientToken, Description, Tags}
 *                      201 {SnapshotId, Status: pending, BlockSize: 524288, VolumeSize, StartTime, Tags, …}
 *   PutSnapshotBlock   PUT  /snapshots/{id}/blocks/{index}, the block as the body, with x-amz-Data-Length
 *                      (524288), x-amz-Checksum (base64 SHA256 of the block), x-amz-Checksum-Algorithm
 *                      (SHA256) and x-amz-Progress; 201 with the checksum headers back
 *   CompleteSnapshot   POST /snapshots/completion/{id} with x-amz-ChangedBlocksCount and, optionally,
 *                      x-amz-Checksum, x-amz-Checksum-Algorithm, x-amz-Checksum-Aggregation-Method
 *                      (LINEAR: the SHA256 of the blocks' checksums in block order); 202 {Status}
 * Errors are `{"Message", "Reason"}` with the `x-amzn-ErrorType` header and the documented status: the
 * stand-in's own are ValidationException 400 and ResourceNotFoundException 404; a test plants others
 * (InternalServerException 500, RequestThrottledException 429, …) with `ebsFaults`. The stand-in
 * checks every checksum and keeps the blocks, so that a test compares a snapshot with its image.
 */
import { createHash, randomBytes } from 'node:crypto';
import type http from 'node:http';

export const EBS_BLOCK_SIZE = 524_288;

export interface StandInSnapshot {
  id: string;
  /** pending while blocks are written; completed, or error; DescribeSnapshots shows it. */
  state: 'pending' | 'completed' | 'error';
  volumeSizeGib: number;
  description: string;
  tags: Record<string, string>;
  startTime: Date;
  clientToken: string | null;
  /** The blocks written, by index. */
  blocks: Map<number, Buffer>;
  /** DescribeSnapshots calls that still show a completed snapshot as pending (as the real one takes a while). */
  pendingPolls: number;
}

/** The bytes a snapshot holds from offset 0 to `bytes` (blocks never written read as zeros). */
export function snapshotBytes(snapshot: StandInSnapshot, bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  for (const [index, block] of snapshot.blocks) {
    const at = index * EBS_BLOCK_SIZE;
    if (at < bytes) block.copy(out, at, 0, Math.min(block.length, bytes - at));
  }
  return out;
}

/** A fault a test plants: the next `times` calls of `operation` fail this way. */
export interface EbsFault {
  operation: 'StartSnapshot' | 'PutSnapshotBlock' | 'CompleteSnapshot';
  /** For PutSnapshotBlock: only this block index. */
  blockIndex?: number;
  status: number;
  type: string;
  message: string;
  times: number;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();

/** Handles one EBS direct API request, or returns false when the path is not one. */
export function ebsHandler(store: {
  snapshots: Map<string, StandInSnapshot>;
  faults: EbsFault[];
  snapshotPolls: number;
}) {
  const fail = (res: http.ServerResponse, status: number, type: string, message: string, reason?: string) => {
    res.writeHead(status, {
      'content-type': 'application/json',
      'x-amzn-errortype': type,
      'x-amzn-requestid': randomBytes(8).toString('hex'),
    });
    res.end(JSON.stringify({ Message: message, ...(reason ? { Reason: reason } : {}) }));
  };
  const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const fault = (operation: EbsFault['operation'], blockIndex?: number) => {
    const f = store.faults.find(
      (x) => x.operation === operation && x.times > 0 && (x.blockIndex === undefined || x.blockIndex === blockIndex),
    );
    if (f) f.times--;
    return f;
  };
  const header = (req: http.IncomingMessage, name: string) => {
    const v = req.headers[name.toLowerCase()];
    return typeof v === 'string' ? v : undefined;
  };

  return (req: http.IncomingMessage, url: URL, body: Buffer, res: http.ServerResponse): boolean => {
    const path = url.pathname;
    if (!path.startsWith('/snapshots')) return false;
    let m: RegExpMatchArray | null;
    if (path === '/snapshots' && req.method === 'POST') {
      const f = fault('StartSnapshot');
      if (f) return (void fail(res, f.status, f.type, f.message), true);
      let input: Record<string, unknown>;
      try {
        input = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        return (void fail(res, 400, 'ValidationException', 'The request body is not JSON'), true);
      }
      const size = input.VolumeSize;
      if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > 65_536) {
        return (
          void fail(
            res,
            400,
            'ValidationException',
            'VolumeSize must be an integer from 1 to 65536 GiB',
            'INVALID_PARAMETER_VALUE',
          ),
          true
        );
      }
      const token = typeof input.ClientToken === 'string' ? input.ClientToken : null;
      const earlier = token ? [...store.snapshots.values()].find((s) => s.clientToken === token) : undefined;
      const tags = Object.fromEntries(
        ((input.Tags as { Key: string; Value: string }[] | undefined) ?? []).map((t) => [t.Key, t.Value]),
      );
      const snapshot: StandInSnapshot = earlier ?? {
        id: `snap-${randomBytes(9).toString('hex').slice(0, 17)}`,
        state: 'pending',
        volumeSizeGib: size,
        description: typeof input.Description === 'string' ? input.Description : '',
        tags,
        startTime: new Date(),
        clientToken: token,
        blocks: new Map(),
        pendingPolls: 0,
      };
      store.snapshots.set(snapshot.id, snapshot);
      return (
        void json(res, 201, {
          SnapshotId: snapshot.id,
          OwnerId: '123456789012',
          Status: 'pending',
          StartTime: Math.floor(snapshot.startTime.getTime() / 1000),
          VolumeSize: snapshot.volumeSizeGib,
          BlockSize: EBS_BLOCK_SIZE,
          Description: snapshot.description,
          Tags: Object.entries(snapshot.tags).map(([Key, Value]) => ({ Key, Value })),
        }),
        true
      );
    }
    if ((m = path.match(/^\/snapshots\/([^/]+)\/blocks\/([^/]+)$/)) && req.method === 'PUT') {
      const snapshot = store.snapshots.get(decodeURIComponent(m[1]!));
      const index = Number(m[2]);
      const f = fault('PutSnapshotBlock', index);
      if (f) return (void fail(res, f.status, f.type, f.message), true);
      if (!snapshot)
        return (
          void fail(res, 404, 'ResourceNotFoundException', `The snapshot ${m[1]} does not exist`, 'SNAPSHOT_NOT_FOUND'),
          true
        );
      if (snapshot.state !== 'pending')
        return (
          void fail(
            res,
            400,
            'ValidationException',
            'The snapshot is not in the pending state',
            'INVALID_SNAPSHOT_STATE',
          ),
          true
        );
      if (!Number.isInteger(index) || index < 0 || index * EBS_BLOCK_SIZE >= snapshot.volumeSizeGib * 2 ** 30) {
        return (
          void fail(res, 400, 'ValidationException', 'The block index is out of the volume', 'INVALID_BLOCK'),
          true
        );
      }
      if (Number(header(req, 'x-amz-Data-Length')) !== EBS_BLOCK_SIZE || body.length !== EBS_BLOCK_SIZE) {
        return (
          void fail(
            res,
            400,
            'ValidationException',
            `The data length must be ${EBS_BLOCK_SIZE}`,
            'INVALID_DATA_LENGTH',
          ),
          true
        );
      }
      if (header(req, 'x-amz-Checksum-Algorithm') !== 'SHA256')
        return (
          void fail(res, 400, 'ValidationException', 'Only SHA256 checksums are supported', 'UNSUPPORTED_CHECKSUM'),
          true
        );
      const checksum = sha256(body).toString('base64');
      if (header(req, 'x-amz-Checksum') !== checksum)
        return (
          void fail(res, 400, 'ValidationException', 'The checksum does not match the data', 'INVALID_CHECKSUM'),
          true
        );
      snapshot.blocks.set(index, Buffer.from(body));
      res.writeHead(201, { 'x-amz-checksum': checksum, 'x-amz-checksum-algorithm': 'SHA256' });
      return (void res.end(), true);
    }
    if ((m = path.match(/^\/snapshots\/completion\/([^/]+)$/)) && req.method === 'POST') {
      const f = fault('CompleteSnapshot');
      if (f) return (void fail(res, f.status, f.type, f.message), true);
      const snapshot = store.snapshots.get(decodeURIComponent(m[1]!));
      if (!snapshot)
        return (
          void fail(res, 404, 'ResourceNotFoundException', `The snapshot ${m[1]} does not exist`, 'SNAPSHOT_NOT_FOUND'),
          true
        );
      if (snapshot.state !== 'pending')
        return (
          void fail(
            res,
            400,
            'ValidationException',
            'The snapshot is not in the pending state',
            'INVALID_SNAPSHOT_STATE',
          ),
          true
        );
      const changed = Number(header(req, 'x-amz-ChangedBlocksCount'));
      if (changed !== snapshot.blocks.size) {
        return (
          void fail(
            res,
            400,
            'ValidationException',
            `ChangedBlocksCount ${changed} is not the ${snapshot.blocks.size} blocks written`,
            'INVALID_PARAMETER_VALUE',
          ),
          true
        );
      }
      const given = header(req, 'x-amz-Checksum');
      if (given !== undefined) {
        if (
          header(req, 'x-amz-Checksum-Algorithm') !== 'SHA256' ||
          header(req, 'x-amz-Checksum-Aggregation-Method') !== 'LINEAR'
        ) {
          return (
            void fail(
              res,
              400,
              'ValidationException',
              'The aggregated checksum must be SHA256, LINEAR',
              'UNSUPPORTED_CHECKSUM',
            ),
            true
          );
        }
        const ordered = [...snapshot.blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => sha256(block));
        if (sha256(Buffer.concat(ordered)).toString('base64') !== given) {
          snapshot.state = 'error';
          return (
            void fail(
              res,
              400,
              'ValidationException',
              'The aggregated checksum does not match the blocks',
              'INVALID_CHECKSUM',
            ),
            true
          );
        }
      }
      snapshot.state = 'completed';
      snapshot.pendingPolls = store.snapshotPolls;
      return (void json(res, 202, { Status: snapshot.pendingPolls > 0 ? 'pending' : 'completed' }), true);
    }
    fail(res, 400, 'ValidationException', `${req.method} ${path} is not part of this stand-in`);
    return true;
  };
}
