/** The route table: every route the API serves. The auth matrix test walks this list. */
import { buildOpenApi } from '#server/http/openapi.ts';
import { authenticated, defineRoute, type Route } from '#server/http/route.ts';
import { analysisRoutes } from '#server/http/routes/analysis-routes.ts';
import { authRoutes } from '#server/http/routes/auth-routes.ts';
import { exportRoutes } from '#server/http/routes/export-routes.ts';
import { imageRoutes } from '#server/http/routes/image-routes.ts';
import { importRoutes } from '#server/http/routes/import-routes.ts';
import { findingRoutes } from '#server/http/routes/finding-routes.ts';
import { readerFindingRoutes } from '#server/http/routes/reader-finding-routes.ts';
import { measurementRoutes } from '#server/http/routes/measurement-routes.ts';
import { metaRoutes } from '#server/http/routes/meta-routes.ts';
import { reportRoutes } from '#server/http/routes/report-routes.ts';
import { scanRoutes } from '#server/http/routes/scan-routes.ts';
import { userRoutes } from '#server/http/routes/user-routes.ts';
import { syncRoutes } from '#server/http/routes/sync-routes.ts';
import { dicomwebRoutes } from '#server/http/routes/dicomweb-routes.ts';
import { dicomPeerRoutes } from '#server/http/routes/dicom-peer-routes.ts';
import { routingRoutes } from '#server/http/routes/routing-routes.ts';
import { queryRetrieveRoutes } from '#server/http/routes/query-retrieve-routes.ts';
import { structuredReportRoutes } from '#server/http/routes/structured-report-routes.ts';

const domainRoutes: Route[] = [...authRoutes, ...userRoutes, ...scanRoutes, ...findingRoutes, ...readerFindingRoutes, ...reportRoutes, ...exportRoutes, ...importRoutes, ...imageRoutes, ...measurementRoutes, ...analysisRoutes, ...metaRoutes, ...syncRoutes, ...dicomPeerRoutes, ...queryRetrieveRoutes, ...routingRoutes, ...dicomwebRoutes, ...structuredReportRoutes];

let openApiDocument: unknown;

const openApiRoute = defineRoute({
  method: 'get',
  path: '/v1/openapi.json',
  summary: 'This API as an OpenAPI 3.1 document',
  access: authenticated,
  handle: () => {
    openApiDocument ??= buildOpenApi(ROUTES);
    return { kind: 'data', data: openApiDocument };
  },
});

export const ROUTES: readonly Route[] = [...domainRoutes, openApiRoute];
