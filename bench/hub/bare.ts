/**
 * The floor for bench/hub.bench.ts: bare Express on loopback. GET /v1/scan/results answers a
 * stored body of the size mia's answer had (--small bytes, or --large with limit=500); POST
 * /v1/instances reads the whole body and answers 201 with a short JSON. Prints {url, key, pid}.
 */
import { parseArgs } from 'node:util';
import express from 'express';

const { values } = parseArgs({ options: { small: { type: 'string' }, large: { type: 'string' } } });
const body = (bytes: number): string => JSON.stringify({ items: 'x'.repeat(Math.max(0, bytes - 13)) });
const small = body(Number(values.small ?? 14_000));
const large = body(Number(values.large ?? 140_000));

const app = express();
app.get('/v1/scan/results', (req, res) => {
  res.type('application/json').send(req.query['limit'] === '500' ? large : small);
});
app.post('/v1/instances', (req, res) => {
  let bytes = 0;
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on('end', () => {
    res.status(201).json({ data: { stored: bytes } });
  });
});

const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}`, key: '', pid: process.pid }) + '\n');
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
