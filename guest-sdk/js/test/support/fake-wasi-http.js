// A stand-in for componentize-js's bindings of wasi:http (outgoing-handler, types) and
// wasi:io/poll, strict about what the host is strict about: resources used only while alive,
// released once, never with live children (a pollable of its future, a stream of its body, the
// headers and body of their response), and gone once handed over (a request to `handle`, a
// body to `finish`). Errors are thrown as the bindings throw them: an Error with `payload`.
//
// `server.answer(request)` says what the host does with a request, once its body is written:
//   { status, headers: [[name, bytes]], chunks: [bytes], end }  a response (end: an error code
//                                                               the body breaks off with)
//   { error: code }    the future fails        { refuse: code }  `handle` itself throws
// (`refuse` and `error` are looked at when the request is handed over.)

const DISPOSE = Symbol.dispose ?? Symbol.for("dispose");

export const server = {
  answer: () => ({ status: 200, headers: [], chunks: [] }),
  live: new Set(),
  events: [],
  sent: [],
  readyAtOnce: 1,
  forbidden: new Set(["host", "connection"]),
  reset() {
    this.live.clear();
    this.events.length = 0;
    this.sent.length = 0;
    this.readyAtOnce = 1;
  },
};

function thrown(payload) {
  const e = new Error(`component error: ${JSON.stringify(payload)}`);
  e.payload = payload;
  return e;
}

class Resource {
  #children = new Set();
  #parent;
  gone;
  constructor(parent) {
    this.#parent = parent;
    server.live.add(this);
    parent?.#children.add(this);
  }
  check() {
    if (this.gone) throw new Error(`${this.constructor.name} used after it was ${this.gone}`);
  }
  end(how) {
    this.check();
    if (this.#children.size > 0) {
      throw new Error(`${this.constructor.name} ${how} with live children: ${[...this.#children].map((c) => c.constructor.name)}`);
    }
    this.gone = how;
    server.live.delete(this);
    this.#parent?.#children.delete(this);
  }
  [DISPOSE]() {
    this.end("dropped");
  }
}

export class Fields extends Resource {
  constructor(entries = [], parent = undefined) {
    super(parent);
    this.list = entries;
  }
  static fromList(entries) {
    for (const [name, value] of entries) {
      if (typeof name !== "string" || !(value instanceof Uint8Array)) throw new TypeError("fields are [string, Uint8Array]");
      if (server.forbidden.has(name.toLowerCase())) throw thrown({ tag: "forbidden" });
    }
    return new Fields(entries);
  }
  entries() {
    this.check();
    return this.list.map(([n, v]) => [n, v]);
  }
}

class OutputStream extends Resource {
  constructor(body) {
    super(body);
    this.body = body;
  }
  blockingWriteAndFlush(bytes) {
    this.check();
    if (!(bytes instanceof Uint8Array) || bytes.length > 4096) throw new Error(`writes of at most 4096 bytes, got ${bytes.length}`);
    if (this.body.request.closed) throw thrown({ tag: "closed" });
    const all = new Uint8Array(this.body.request.written.length + bytes.length);
    all.set(this.body.request.written);
    all.set(bytes, this.body.request.written.length);
    this.body.request.written = all;
  }
}

export class OutgoingBody extends Resource {
  constructor(request) {
    super();
    this.request = request;
    this.writing = false;
  }
  write() {
    this.check();
    if (this.writing) throw thrown(undefined);
    this.writing = true;
    return new OutputStream(this);
  }
  static finish(body) {
    body.end("moved");
    body.request.finished = true;
  }
}

export class OutgoingRequest extends Resource {
  constructor(fields) {
    fields.end("moved");
    super();
    this.headers = fields.list;
    this.written = new Uint8Array(0);
    this.finished = false;
    this.closed = false;
    this.bodyTaken = false;
  }
  setMethod(m) {
    this.check();
    this.method = m;
  }
  setScheme(s) {
    this.check();
    this.scheme = s;
  }
  setAuthority(a) {
    this.check();
    this.authority = a;
  }
  setPathWithQuery(p) {
    this.check();
    this.pathWithQuery = p;
  }
  body() {
    this.check();
    if (this.bodyTaken) throw thrown(undefined);
    this.bodyTaken = true;
    return new OutgoingBody(this);
  }
  get url() {
    return `${this.scheme.tag.toLowerCase()}://${this.authority}${this.pathWithQuery}`;
  }
}

class Pollable extends Resource {
  constructor(future) {
    super(future);
    this.future = future;
  }
}

class IoError extends Resource {
  constructor(code, text = "an io error") {
    super();
    this.code = code;
    this.text = text;
  }
  toDebugString() {
    this.check();
    return this.text;
  }
}

export function httpErrorCode(err) {
  err.check();
  return err.code;
}

class InputStream extends Resource {
  constructor(body, chunks, end) {
    super(body);
    this.chunks = [...chunks];
    this.endCode = end;
  }
  blockingRead(n) {
    this.check();
    if (typeof n !== "bigint" || n <= 0n) throw new TypeError(`blockingRead takes a positive bigint, got ${n}`);
    if (this.chunks.length > 0) {
      const chunk = this.chunks.shift();
      if (chunk.length > Number(n)) {
        this.chunks.unshift(chunk.subarray(Number(n)));
        return chunk.subarray(0, Number(n));
      }
      return chunk;
    }
    if (this.endCode === undefined) throw thrown({ tag: "closed" });
    // a string: an io error without an error code
    const error = typeof this.endCode === "string" ? new IoError(undefined, this.endCode) : new IoError(this.endCode);
    throw thrown({ tag: "last-operation-failed", val: error });
  }
}

class IncomingBody extends Resource {
  constructor(response) {
    super(response);
    this.response = response;
    this.streamed = false;
  }
  stream() {
    this.check();
    if (this.streamed) throw thrown(undefined);
    this.streamed = true;
    return new InputStream(this, this.response.answer.chunks ?? [], this.response.answer.end);
  }
}

class IncomingResponse extends Resource {
  constructor(answer) {
    super();
    this.answer = answer;
    this.consumed = false;
  }
  status() {
    this.check();
    return this.answer.status;
  }
  headers() {
    this.check();
    return new Fields(this.answer.headers ?? [], this); // a child of the response
  }
  consume() {
    this.check();
    if (this.consumed) throw thrown(undefined);
    this.consumed = true;
    return new IncomingBody(this);
  }
}

class FutureIncomingResponse extends Resource {
  constructor(request, early) {
    super();
    this.request = request;
    this.early = early;
    this.taken = false;
  }
  subscribe() {
    this.check();
    return new Pollable(this);
  }
  ready() {
    return this.early !== undefined || this.request.finished;
  }
  get() {
    this.check();
    if (!this.ready()) return undefined;
    if (this.taken) return { tag: "err", val: undefined };
    this.taken = true;
    if (this.early) return { tag: "ok", val: { tag: "err", val: this.early.error } };
    const answer = server.answer(this.request);
    if (answer.error) return { tag: "ok", val: { tag: "err", val: answer.error } };
    server.events.push(`response ${this.request.url}`);
    return { tag: "ok", val: { tag: "ok", val: new IncomingResponse(answer) } };
  }
}

export function handle(request, options) {
  request.end("moved");
  if (options !== undefined) throw new Error("no request options expected");
  server.events.push(`send ${request.method.tag} ${request.url}`);
  server.sent.push(request);
  const early = server.answer(request);
  if (early.refuse) throw thrown(early.refuse);
  if (early.error) {
    request.closed = true;
    return new FutureIncomingResponse(request, early);
  }
  return new FutureIncomingResponse(request, undefined);
}

export function poll(pollables) {
  if (pollables.length === 0) throw new Error("poll of an empty list traps");
  for (const p of pollables) p.check();
  server.events.push(`poll ${pollables.length}`);
  const ready = [];
  pollables.forEach((p, i) => p.future.ready() && ready.push(i));
  if (ready.length === 0) throw new Error("nothing would ever be ready: the guest waits forever");
  return new Uint32Array(ready.slice(0, server.readyAtOnce));
}
