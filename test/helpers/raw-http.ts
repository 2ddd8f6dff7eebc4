/**
 * Raw HTTP over a socket, for requests node:http and fetch will not send (duplicate Host
 * headers, half-sent headers) and for watching what the server does with the connection.
 */
import { connect, type Socket } from 'node:net';

/** A connected socket to the server at `url` (http://host:port). */
export function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Everything the server sends until it closes the connection (a reset counts as a close). */
export function readUntilClosed(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

/** Sends `head` (request line and headers, CRLF-separated, without the blank line) with
 * Connection: close and returns the status code and the whole response text. */
export async function rawRequest(url: string, head: string): Promise<{ status: number; text: string }> {
  const socket = await openSocket(url);
  const closed = readUntilClosed(socket);
  socket.write(`${head}\r\nConnection: close\r\n\r\n`);
  const text = await closed;
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
}
