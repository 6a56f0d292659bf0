/**
 * A TCP relay in front of Redis that reads RESP at command boundaries, for crash-point
 * injection: it counts the commands one gateway process sends while armed, and at the Nth
 * either holds it (it never reaches Redis: `before`) or lets Redis run it and holds the answer
 * (`after`), then calls `onHit` (the test SIGKILLs the gateway there). From the hit on, nothing
 * more is carried either way on any link, so nothing the process sends later reaches Redis.
 *
 *   const relay = await startCrashRelay(redis.url);          // the victim's redis.url: relay.url
 *   relay.record();  ...flow...  relay.recorded()            // the flow's commands, in order
 *   relay.arm({ at: 3, mode: 'after', onHit: kill });         // then the flow again
 *
 * Only commands that touch data are counted (not PING, INFO, CLIENT, SELECT, SUBSCRIBE ...), and
 * nothing on a link that has subscribed (pub/sub has no command/answer pairing), nor what
 * `background` says a timer sent rather than the flow (it would move the count).
 */
import net from 'node:net';
import { listenOnLoopback } from './listen.js';

export type CrashMode = 'before' | 'after';

export interface CrashPlan {
  at: number;
  mode: CrashMode;
  onHit: (command: string[]) => void;
}

export interface CrashRelay {
  url: string;
  /** Counts (and lists) the commands from now on, without stopping anything. */
  record(): void;
  /** The commands counted since record() or arm(): name and first key. */
  recorded(): string[];
  arm(plan: CrashPlan): void;
  /** Whether the armed plan hit. */
  hit(): boolean;
  disarm(): void;
  close(): Promise<void>;
}

const UNCOUNTED = new Set(['PING', 'INFO', 'CLIENT', 'SELECT', 'HELLO', 'AUTH', 'READONLY', 'CLUSTER', 'COMMAND', 'SUBSCRIBE', 'PSUBSCRIBE', 'SSUBSCRIBE', 'UNSUBSCRIBE', 'PUNSUBSCRIBE', 'QUIT', 'ROLE', 'WAIT', 'SCRIPT']);

/** Bytes of the RESP value at `at` in `buf`, or -1 when it is not complete yet. */
function respLength(buf: Buffer, at: number): number {
  if (at >= buf.length) return -1;
  const lineEnd = buf.indexOf('\r\n', at, 'latin1');
  if (lineEnd < 0) return -1;
  const type = String.fromCharCode(buf[at] as number);
  const head = buf.toString('latin1', at + 1, lineEnd);
  const afterLine = lineEnd + 2;
  switch (type) {
    case '+':
    case '-':
    case ':':
    case '_':
    case ',':
    case '#':
    case '(':
      return afterLine - at;
    case '$':
    case '=':
    case '!': {
      const n = Number(head);
      if (n < 0) return afterLine - at;
      return afterLine + n + 2 <= buf.length ? afterLine + n + 2 - at : -1;
    }
    case '*':
    case '~':
    case '>':
    case '%': {
      let n = Number(head);
      if (n < 0) return afterLine - at;
      if (type === '%') n *= 2;
      let pos = afterLine;
      for (let i = 0; i < n; i++) {
        const len = respLength(buf, pos);
        if (len < 0) return -1;
        pos += len;
      }
      return pos - at;
    }
    default: {
      // An inline command (not what ioredis sends): up to the line's end.
      return afterLine - at;
    }
  }
}

/** The bulk strings of a command array. */
function commandParts(buf: Buffer): string[] {
  const parts: string[] = [];
  if (buf[0] !== 0x2a) return buf.toString('latin1').trim().split(/\s+/);
  let pos = buf.indexOf('\r\n', 0, 'latin1') + 2;
  while (pos < buf.length) {
    const lineEnd = buf.indexOf('\r\n', pos, 'latin1');
    const n = Number(buf.toString('latin1', pos + 1, lineEnd));
    parts.push(buf.toString('utf8', lineEnd + 2, lineEnd + 2 + n));
    pos = lineEnd + 2 + n + 2;
  }
  return parts;
}

export function describeCommand(parts: string[]): string {
  const name = (parts[0] ?? '').toUpperCase();
  // EVAL's script is long: its first line's gist and its first key stand for it.
  if (name === 'EVAL') return `EVAL ${(parts[1] ?? '').trim().split('\n')[0]?.slice(0, 40)} ${parts[3] ?? ''}`;
  return `${name} ${parts[1] ?? ''}`;
}

export async function startCrashRelay(targetUrl: string, background: (parts: string[]) => boolean = () => false): Promise<CrashRelay> {
  const target = new URL(targetUrl);
  let counting = false;
  let count = 0;
  let listed: string[] = [];
  let plan: CrashPlan | undefined;
  let hit = false;
  /** Once hit, every link stops carrying anything. */
  let frozen = false;
  const links = new Set<{ client: net.Socket; upstream: net.Socket }>();

  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    const link = { client, upstream };
    links.add(link);
    let fromClient = Buffer.alloc(0);
    let fromUpstream = Buffer.alloc(0);
    let subscribed = false;
    let sent = 0;
    let answered = 0;
    /** `after`: the answer whose arrival is the hit. */
    let awaitAnswer: { index: number; parts: string[] } | undefined;

    client.on('data', (chunk: Buffer) => {
      if (frozen) return;
      fromClient = Buffer.concat([fromClient, chunk]);
      let pos = 0;
      for (;;) {
        const len = respLength(fromClient, pos);
        if (len < 0) break;
        const raw = fromClient.subarray(pos, pos + len);
        const parts = commandParts(raw);
        const name = (parts[0] ?? '').toUpperCase();
        if (/SUBSCRIBE$/.test(name)) subscribed = true;
        const counted = counting && !subscribed && !UNCOUNTED.has(name) && !background(parts);
        if (counted) {
          count += 1;
          listed.push(describeCommand(parts));
          if (plan && count === plan.at) {
            hit = true;
            frozen = true;
            if (plan.mode === 'after') {
              upstream.write(raw);
              sent += 1;
              awaitAnswer = { index: sent, parts };
            } else {
              plan.onHit(parts);
            }
            fromClient = Buffer.alloc(0);
            return;
          }
        }
        upstream.write(raw);
        sent += 1;
        pos += len;
      }
      fromClient = fromClient.subarray(pos);
    });

    upstream.on('data', (chunk: Buffer) => {
      if (subscribed && !awaitAnswer) {
        if (!frozen) client.write(chunk);
        return;
      }
      fromUpstream = Buffer.concat([fromUpstream, chunk]);
      let pos = 0;
      for (;;) {
        const len = respLength(fromUpstream, pos);
        if (len < 0) break;
        answered += 1;
        if (!frozen) client.write(fromUpstream.subarray(pos, pos + len));
        pos += len;
        if (awaitAnswer !== undefined && answered === awaitAnswer.index && plan) {
          const parts = awaitAnswer.parts;
          awaitAnswer = undefined;
          plan.onHit(parts);
          upstream.destroy();
          return;
        }
      }
      fromUpstream = fromUpstream.subarray(pos);
    });

    const drop = () => {
      links.delete(link);
      client.destroy();
      // An `after` hit waits for Redis's answer before the link goes.
      if (!awaitAnswer) upstream.destroy();
    };
    client.on('close', drop).on('error', drop);
    upstream.on('close', () => {
      links.delete(link);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
  });
  const port = await listenOnLoopback(server);

  return {
    url: `redis://127.0.0.1:${port}`,
    record() {
      counting = true;
      count = 0;
      listed = [];
      plan = undefined;
      hit = false;
      frozen = false;
    },
    recorded: () => [...listed],
    arm(next) {
      counting = true;
      count = 0;
      listed = [];
      plan = next;
      hit = false;
      frozen = false;
    },
    hit: () => hit,
    disarm() {
      counting = false;
      plan = undefined;
      frozen = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of links) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
