import { describe, expect, it } from 'vitest';
import { CLOSE_REASON_MAX_BYTES, closeReason, closeSocket } from '../../src/api/ws/connections.js';
import WebSocket, { WebSocketServer } from 'ws';

describe('closeReason', () => {
  it('keeps a reason the protocol carries and cuts a longer one between two characters', () => {
    expect(closeReason('Going away')).toBe('Going away');
    const exact = 'x'.repeat(CLOSE_REASON_MAX_BYTES);
    expect(closeReason(exact)).toBe(exact);
    const long = `Too many requests: ${'é'.repeat(100)}`;
    const cut = closeReason(long);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(CLOSE_REASON_MAX_BYTES);
    expect(cut.endsWith('é…')).toBe(true);
    expect(long.startsWith(cut.slice(0, -1))).toBe(true);
  });

  it('lets a real ws socket close with a reason longer than the protocol carries', async () => {
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise<void>((r) => server.once('listening', () => r()));
    const { port } = server.address() as { port: number };
    server.on('connection', (socket) => closeSocket(socket, 4429, `Too many requests: ${'a'.repeat(200)}`));
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    const closed = await new Promise<{ code: number; reason: string }>((resolve) =>
      client.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    server.close();
    expect(closed.code).toBe(4429);
    expect(closed.reason).toBe(closeReason(`Too many requests: ${'a'.repeat(200)}`));
  });
});
