import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerAllowed } from '#server/peers/caller-check.ts';
import { dicomWebPeer, dimsePeer } from '#server/peers/peers.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const pacs = { kind: 'dimse', name: 'Main PACS', ae_title: 'MAINPACS', host: '127.0.0.1', port: 11112, allow_incoming: true };

describe('DICOM peers', () => {
  it('adds a DICOM node and a DICOMweb server; the Authorization header is stored but never shown', async () => {
    const node = await t.request('POST', '/v1/dicom/peers', { body: pacs });
    expect(node.status).toBe(201);
    expect(node.json.data).toMatchObject({ name: 'Main PACS', kind: 'dimse', ae_title: 'MAINPACS', host: '127.0.0.1', port: 11112, allow_incoming: true, url: null });
    const web = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name: 'cloud', url: 'https://pacs.example.org/dicom-web/', authorization: 'Bearer s3cret-token' } });
    expect(web.status).toBe(201);
    expect(web.json.data).toMatchObject({ url: 'https://pacs.example.org/dicom-web', has_authorization: true });
    const list = await t.request('GET', '/v1/dicom/peers');
    expect(list.json.data.items.map((p: { name: string }) => p.name)).toEqual(['Main PACS', 'cloud']);
    expect(list.text).not.toContain('s3cret-token');
    expect(await dicomWebPeer(t.server.services, 'cloud')).toEqual({ name: 'cloud', url: 'https://pacs.example.org/dicom-web', headers: { Authorization: 'Bearer s3cret-token' } });

    // Changing the URL without sending the header keeps it; sending null removes it.
    const id = web.json.data.id as string;
    const moved = await t.request('PUT', `/v1/dicom/peers/${id}`, { body: { kind: 'dicomweb', name: 'cloud', url: 'https://pacs2.example.org/dicom-web' } });
    expect(moved.json.data).toMatchObject({ url: 'https://pacs2.example.org/dicom-web', has_authorization: true });
    expect((await dicomWebPeer(t.server.services, id)).headers).toEqual({ Authorization: 'Bearer s3cret-token' });
    const cleared = await t.request('PUT', `/v1/dicom/peers/${id}`, { body: { kind: 'dicomweb', name: 'cloud', url: 'https://pacs2.example.org/dicom-web', authorization: null } });
    expect(cleared.json.data.has_authorization).toBe(false);
    expect(await dimsePeer(t.server.services, 'Main PACS')).toEqual({ name: 'Main PACS', aeTitle: 'MAINPACS', host: '127.0.0.1', port: 11112 });
    await expect(dimsePeer(t.server.services, 'cloud')).rejects.toThrow(/not a DICOM node/);
  });

  it('refuses bad AE titles, hosts, ports and URLs, naming the field', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...pacs, name: 'a', ae_title: 'THIS_AE_TITLE_IS_TOO_LONG' }, /ae_title.*16 characters/],
      [{ ...pacs, name: 'b', ae_title: 'BACK\\SLASH' }, /ae_title/],
      [{ ...pacs, name: 'c', ae_title: '    ' }, /ae_title.*only spaces/],
      [{ ...pacs, name: 'd', host: 'bad host!' }, /host/],
      [{ ...pacs, name: 'e', port: 70000 }, /port/],
      [{ kind: 'dicomweb', name: 'f', url: 'ftp://x/' }, /url/],
      [{ kind: 'dicomweb', name: 'g', url: 'http://x', authorization: 'line\nbreak' }, /authorization/],
      [{ ...pacs, name: 'h', url: 'http://x' }, /url/],
    ];
    for (const [body, expected] of cases) {
      const reply = await t.request('POST', '/v1/dicom/peers', { body });
      expect(reply.status, JSON.stringify(body)).toBe(400);
      expect(`${reply.json.error.message} ${reply.json.error.details}`).toMatch(expected);
    }
    expect((await t.request('POST', '/v1/dicom/peers', { body: pacs })).status).toBe(409);
  });

  it('lets a node call mia only with its AE title, from its host, while allowed', async () => {
    const deps = t.server.services;
    expect(await callerAllowed(deps, { callingAeTitle: 'MAINPACS', host: '127.0.0.1' })).toBe(true);
    expect(await callerAllowed(deps, { callingAeTitle: 'MAINPACS', host: '::ffff:127.0.0.1' })).toBe(true);
    expect(await callerAllowed(deps, { callingAeTitle: 'MAINPACS', host: '10.1.2.3' })).toBe(false);
    expect(await callerAllowed(deps, { callingAeTitle: 'OTHER', host: '127.0.0.1' })).toBe(false);
    const named = await t.request('POST', '/v1/dicom/peers', { body: { ...pacs, name: 'by name', ae_title: 'CTSCANNER', host: 'localhost', allow_incoming: false } });
    expect(await callerAllowed(deps, { callingAeTitle: 'CTSCANNER', host: '127.0.0.1' })).toBe(false);
    await t.request('PUT', `/v1/dicom/peers/${named.json.data.id}`, { body: { ...pacs, name: 'by name', ae_title: 'CTSCANNER', host: 'localhost', allow_incoming: true } });
    expect(await callerAllowed(deps, { callingAeTitle: 'CTSCANNER', host: '127.0.0.1' })).toBe(true);
    expect((await t.request('DELETE', `/v1/dicom/peers/${named.json.data.id}`)).status).toBe(200);
    expect(await callerAllowed(deps, { callingAeTitle: 'CTSCANNER', host: '127.0.0.1' })).toBe(false);
  });

  it('is for admins only', async () => {
    const { key } = await t.keyFor('radiologist');
    expect((await t.request('GET', '/v1/dicom/peers', { key })).status).toBe(403);
  });
});
