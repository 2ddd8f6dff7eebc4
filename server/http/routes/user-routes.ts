/** User administration (admin only: scope manage:users, held through *). */
import * as api from '#server/api/schemas.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { createUser, getUser, listUsers, toUser, updateUser } from '#server/users/users.ts';

const admin = scopes('manage:users');

export const userRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/users',
    summary: 'List users',
    access: admin,
    query: api.usersQuery,
    response: api.user,
    list: true,
    audit: 'users.list',
    handle: async ({ services, query }) => {
      const page = await listUsers(services, { role: query.role, status: query.status }, pageRequest(query));
      return { kind: 'list', items: page.items.map(toUser), nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/users',
    summary: 'Create a user',
    access: admin,
    currentKeyOnly: true,
    body: api.createUserBody,
    response: api.user,
    successStatus: 201,
    audit: 'users.create',
    handle: async ({ services, body, audit }) => {
      const user = toUser(await createUser(services, body));
      audit({ target: `user:${user.id}` });
      return { kind: 'data', status: 201, data: user };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/users/{id}',
    summary: 'One user',
    access: admin,
    params: api.idParam,
    response: api.user,
    audit: 'users.read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `user:${params.id}` });
      return { kind: 'data', data: toUser(await getUser(services, params.id)) };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/users/{id}',
    summary: 'Change a user\'s role, status or name',
    description: 'Disabling a user makes all their keys fail with 401 at once.',
    access: admin,
    currentKeyOnly: true,
    params: api.idParam,
    body: api.updateUserBody,
    response: api.user,
    audit: 'users.update',
    handle: async ({ services, params, body, audit }) => {
      audit({ target: `user:${params.id}` });
      return { kind: 'data', data: toUser(await updateUser(services, params.id, body)) };
    },
  }),
];
