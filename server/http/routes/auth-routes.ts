/** Identity and API key routes (spec 5). */
import * as api from '#server/api/schemas.ts';
import { issueKey, listKeys, revokeKey, rotateKey } from '#server/auth/api-keys.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { authenticated, defineRoute, type Route } from '#server/http/route.ts';

export const authRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/auth/me',
    summary: 'The authenticated user with role and the scopes of the key used',
    access: authenticated,
    response: api.me,
    handle: ({ auth }) => ({
      kind: 'data',
      data: { user: { id: auth.userId, email: auth.email, role: auth.role, scopes: auth.scopes } },
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/auth/keys',
    summary: "List API keys: your own, or anyone's for an admin (filter user_id)",
    access: authenticated,
    query: api.keysQuery,
    response: api.apiKey,
    list: true,
    audit: 'keys.list',
    handle: async ({ services, auth, query }) => {
      const page = await listKeys(services, auth, { userId: query.user_id }, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/auth/keys',
    summary: 'Create an API key; the key is returned in clear this once',
    description: 'Admins may create keys for other users (user_id) and grant extra scopes.',
    access: authenticated,
    currentKeyOnly: true,
    body: api.createKeyBody,
    response: api.issuedKey,
    successStatus: 201,
    audit: 'keys.create',
    handle: async ({ services, auth, body, audit }) => {
      const { apiKey, key } = await issueKey(services, auth, { userId: body.user_id, name: body.name, scopes: body.scopes });
      audit({ target: `key:${apiKey.id}` });
      return { kind: 'data', status: 201, data: { api_key: apiKey, key } };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/auth/keys/{id}/rotate',
    summary: 'Rotate a key: the new key works at once, the old one for 24 more hours',
    access: authenticated,
    currentKeyOnly: true,
    params: api.idParam,
    response: api.rotatedKey,
    successStatus: 201,
    audit: 'keys.rotate',
    handle: async ({ services, auth, params, audit }) => {
      audit({ target: `key:${params.id}` });
      const rotated = await rotateKey(services, auth, params.id);
      return {
        kind: 'data',
        status: 201,
        data: { api_key: rotated.apiKey, key: rotated.key, previous: { id: rotated.previous.id, expires_at: rotated.previous.expiresAt } },
      };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/auth/keys/{id}',
    summary: 'Revoke a key; it stops working immediately',
    access: authenticated,
    currentKeyOnly: true,
    params: api.idParam,
    response: api.apiKey,
    audit: 'keys.revoke',
    handle: async ({ services, auth, params, audit }) => {
      audit({ target: `key:${params.id}` });
      return { kind: 'data', data: await revokeKey(services, auth, params.id) };
    },
  }),
];

