'use strict';
/* ONNX Runtime's side of `make bench-peers`: a long-lived process that
 * bench_peers.py drives with one JSON request per line on stdin; each answer
 * is one line "@@ {json}" on stdout (anything else ORT prints is not read).
 *
 *   node ort_worker.js NODE_MODULES THREADS
 *
 * Requests (tensors are raw little-endian f32 files, [B, H, N, D]):
 *   {"op": "hello"}                                  -> version, library
 *   {"op": "load", "dir", "B", "H", "N", "D", "causal"}  q, k, v from dir
 *   {"op": "time", "reps"}                           -> wall seconds per run
 *   {"op": "dump", "path"}                           output as [B, H, N, D]
 * ORT's layout is [B, N, H*D]: the worker transposes on load and dump,
 * outside the timing. Forward only (ORT is an inference runtime). */
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const { mhaModel } = require('./onnx_mha.js');

const [modulesDir, threadsArg] = process.argv.slice(2);
const threads = parseInt(threadsArg, 10);
const ortDir = path.join(modulesDir, 'onnxruntime-node');
const ort = require(ortDir);

const sessions = new Map(); // "H,hidden,causal" -> InferenceSession
let cur = null; // {shape, feeds, session}

function reply(obj) {
  process.stdout.write('@@ ' + JSON.stringify(obj) + '\n');
}

function readF32(file, count) {
  const buf = fs.readFileSync(file);
  if (buf.length !== count * 4) {
    throw new Error(`${file}: ${buf.length} bytes, expected ${count * 4}`);
  }
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = buf.readFloatLE(4 * i);
  return out;
}

/* [B, H, N, D] <-> [B, N, H, D] */
function bhnd(src, B, H, N, D, toBnhd) {
  const dst = new Float32Array(src.length);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let n = 0; n < N; n++) {
        const a = ((b * H + h) * N + n) * D, c = ((b * N + n) * H + h) * D;
        for (let d = 0; d < D; d++) {
          if (toBnhd) dst[c + d] = src[a + d];
          else dst[a + d] = src[c + d];
        }
      }
  return dst;
}

async function session(H, hidden, causal) {
  const k = `${H},${hidden},${causal}`;
  if (!sessions.has(k)) {
    const s = await ort.InferenceSession.create(mhaModel(H, hidden, causal), {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      logSeverityLevel: 3,
    });
    sessions.set(k, s);
  }
  return sessions.get(k);
}

async function handle(req) {
  switch (req.op) {
    case 'hello': {
      const pkg = JSON.parse(fs.readFileSync(path.join(ortDir, 'package.json'), 'utf8'));
      return { tool: 'onnxruntime', version: pkg.version, threads };
    }
    case 'load': {
      const { B, H, N, D } = req;
      const count = B * H * N * D;
      const feeds = {};
      for (const name of ['q', 'k', 'v']) {
        const x = bhnd(readF32(path.join(req.dir, name + '.f32'), count), B, H, N, D, true);
        const input = { q: 'query', k: 'key', v: 'value' }[name];
        feeds[input] = new ort.Tensor('float32', x, [B, N, H * D]);
      }
      cur = { B, H, N, D, feeds, session: await session(H, H * D, req.causal ? 1 : 0) };
      return {};
    }
    case 'time': {
      if (!cur) throw new Error('time before load');
      const times = [];
      for (let r = 0; r < req.reps; r++) {
        const t0 = process.hrtime.bigint();
        const res = await cur.session.run(cur.feeds);
        times.push(Number(process.hrtime.bigint() - t0) * 1e-9);
        res.output.dispose?.();
      }
      return { times };
    }
    case 'dump': {
      if (!cur) throw new Error('dump before load');
      const { B, H, N, D } = cur;
      const res = await cur.session.run(cur.feeds);
      const out = bhnd(res.output.data, B, H, N, D, false);
      fs.writeFileSync(req.path, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
      return {};
    }
    case 'quit':
      process.exit(0);
    default:
      throw new Error(`unknown op '${req.op}'`);
  }
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    try {
      reply({ ok: true, ...(await handle(JSON.parse(line))) });
    } catch (e) {
      reply({ ok: false, error: String(e && e.message ? e.message : e) });
    }
  }
}

main();
