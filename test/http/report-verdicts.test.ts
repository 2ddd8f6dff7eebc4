/**
 * Issue 11, items 3 and 4: a report's recommendation follows the reader's verdicts (accepted
 * findings, per modality; rejected ones never), and a final report locks the verdicts it was
 * built on: later changes are signed addenda, shown in the report and its CSV/XML.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestSchema } from '#server/analysis/manifest.ts';
import { recommend } from '#server/analysis/recommend.ts';
import { parseCsv } from '../helpers/csv.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

// What the model said for a tumour and an infarct before issue 11: the infarct rule alone.
const OLD_MODEL_TEXT = 'Possible infarct flagged by the model: radiologist review; consider diffusion-weighted MR.';

let t: TestServer;
let reader: { key: string; userId: string };
beforeAll(async () => {
  t = await startTestServer();
  reader = await t.keyFor('radiologist', { email: 'reader@hospital.test' });
});
afterAll(async () => {
  await t.close();
});

type Seeded = { scanId: string; patientId: string; tumour: string; infarct: string };

/** A scan with a tumour (0.8) and an infarct (0.7) found by the bundled model. */
async function tumourAndInfarct(modality: 'CT' | 'MR'): Promise<Seeded> {
  const scan = await seedScan(t.server.services.db, { modality });
  await seedAnalysis(t.server.services.db, scan, [{ label: 'tumor_detected', confidence: 0.8 }, { label: 'infarct_detected', confidence: 0.7 }], {
    recommendation: OLD_MODEL_TEXT,
  });
  const result = await t.request('GET', `/v1/scans/${scan.scanId}/results`, { headers: { 'API-Version': '1.1' } });
  const id = (label: string): string => (result.json.data.findings as Array<{ id: string; label: string }>).find((f) => f.label === label)!.id;
  return { scanId: scan.scanId, patientId: scan.patientId, tumour: id('tumor_detected'), infarct: id('infarct_detected') };
}

const review = (id: string, verdict: 'accepted' | 'rejected' | null) => t.request('PATCH', `/v1/findings/${id}`, { key: reader.key, body: { review: verdict } });
const draft = async (scanId: string) => (await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: scanId } })).json.data;
const getReport = async (id: string) => (await t.request('GET', `/v1/reports/${id}`, { key: reader.key })).json.data;
const finalize = (id: string) => t.request('PATCH', `/v1/reports/${id}`, { key: reader.key, body: { status: 'final' } });

describe('the recommendation follows the verdicts', () => {
  it('accept the tumour, reject the infarct: the final report recommends for the tumour and says nothing of the infarct', async () => {
    const s = await tumourAndInfarct('CT');
    const report = await draft(s.scanId);
    // Before any verdict the model's suggestion stands, marked as the model's.
    expect(report).toMatchObject({ recommendation: OLD_MODEL_TEXT, recommendation_basis: 'model' });

    expect((await review(s.tumour, 'accepted')).status).toBe(200);
    expect((await review(s.infarct, 'rejected')).status).toBe(200);
    const followed = await getReport(report.id);
    expect(followed.recommendation_basis).toBe('verdicts');
    expect(followed.recommendation).toBe('Mass / tumour (accepted on review): consider contrast-enhanced MR to characterise the lesion.');
    expect(followed.findings.map((f: { id: string; review: string | null }) => [f.id, f.review])).toEqual(
      expect.arrayContaining([
        [s.tumour, 'accepted'],
        [s.infarct, 'rejected'],
      ]),
    );

    const final = (await finalize(report.id)).json.data;
    expect(final.status).toBe('final');
    expect(final.recommendation).toContain('tumour (accepted on review)');
    expect(final.recommendation).not.toMatch(/infarct|diffusion/i);
  });

  it('lists every accepted label, the most urgent first, each with its own rule', async () => {
    const s = await tumourAndInfarct('CT');
    await review(s.tumour, 'accepted');
    await review(s.infarct, 'accepted');
    const report = await draft(s.scanId);
    expect(report.recommendation).toBe(
      'Infarct (accepted on review): consider diffusion-weighted MR to confirm and date the infarct. ' +
        'Mass / tumour (accepted on review): consider contrast-enhanced MR to characterise the lesion.',
    );
  });

  it('an MR study is never told to get a diffusion-weighted MR, by the model or by the report', async () => {
    const s = await tumourAndInfarct('MR');
    await review(s.infarct, 'accepted');
    const report = await draft(s.scanId);
    // The tumour has no verdict yet: it does not drive the recommendation, and the reader is told.
    expect(report.recommendation).toBe(
      'Infarct (accepted on review): correlate with the diffusion-weighted and ADC series to date the infarct. 1 AI finding is not reviewed yet.',
    );
    expect(report.recommendation).not.toMatch(/diffusion-weighted MR|contrast-enhanced MR/);

    const manifest = manifestSchema.parse(JSON.parse(readFileSync(join(import.meta.dirname, '../../models/mia-phantom-detector/manifest.json'), 'utf8')));
    const found = [
      { label: 'infarct_detected', confidence: 0.9 },
      { label: 'tumor_detected', confidence: 0.9 },
    ];
    expect(recommend(found, manifest.recommendations, 'MR')).not.toMatch(/diffusion-weighted MR|contrast-enhanced MR/);
    expect(recommend(found, manifest.recommendations, 'CT')).toMatch(/diffusion-weighted MR.*contrast-enhanced MR/);
  });

  it('all findings rejected: no finding drives the recommendation', async () => {
    const s = await tumourAndInfarct('CT');
    await review(s.tumour, 'rejected');
    await review(s.infarct, 'rejected');
    const report = await draft(s.scanId);
    expect(report.recommendation_basis).toBe('verdicts');
    expect(report.recommendation).toMatch(/^No AI finding was accepted on review/);
    expect(report.recommendation).not.toMatch(/tumou?r|infarct|diffusion|contrast/i);
  });

  it('the reader\'s own recommendation is kept when verdicts change; sending back the shown text is not writing one', async () => {
    const s = await tumourAndInfarct('CT');
    const report = await draft(s.scanId);
    const same = await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { impression: 'x', recommendation: report.recommendation } });
    expect(same.json.data.recommendation_basis).toBe('model');
    await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { recommendation: 'Discuss at the tumour board.' } });
    await review(s.tumour, 'accepted');
    const after = await getReport(report.id);
    expect(after).toMatchObject({ recommendation: 'Discuss at the tumour board.', recommendation_basis: 'reader' });
  });
});

describe('a final report locks its verdicts; changes are addenda', () => {
  it('refuses a verdict change on a finding of a final report with 409 pointing to an addendum', async () => {
    const s = await tumourAndInfarct('CT');
    await review(s.tumour, 'accepted');
    await review(s.infarct, 'rejected');
    const report = await draft(s.scanId);
    await finalize(report.id);
    for (const [id, verdict] of [
      [s.infarct, 'accepted'],
      [s.tumour, null],
    ] as const) {
      const refused = await review(id, verdict);
      expect(refused.status).toBe(409);
      expect(refused.json.error.details).toContain(`POST /v1/reports/${report.id}/addenda`);
      expect(refused.json.error.details).toMatch(/addendum/);
    }
    const result = await t.request('GET', `/v1/scans/${s.scanId}/results`, { headers: { 'API-Version': '1.1' } });
    expect(result.json.data.findings.find((f: { id: string }) => f.id === s.infarct).review).toBe('rejected');
    expect((await t.request('GET', `/v1/scans/${s.scanId}`)).json.data.status).toBe('reported');
  });

  it('refuses a second draft for a scan whose report is final with 409 naming the report and its addenda', async () => {
    const s = await tumourAndInfarct('CT');
    const report = await draft(s.scanId);
    await finalize(report.id);
    const again = await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: s.scanId } });
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ status: 'error', error: { code: 409 } });
    expect(again.json.error.message).toContain(report.id);
    expect(again.json.error.details).toContain(`POST /v1/reports/${report.id}/addenda`);
    const reports = await t.request('GET', `/v1/reports?scan_id=${s.scanId}`, { key: reader.key });
    expect(reports.json.data.items.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([[report.id, 'final']]);
  });

  it('adds signed addenda in order with author and time; verdict changes are applied and recorded, the signed text stays', async () => {
    const s = await tumourAndInfarct('CT');
    await review(s.tumour, 'accepted');
    await review(s.infarct, 'rejected');
    const report = await draft(s.scanId);
    const signed = (await finalize(report.id)).json.data;

    // A draft takes edits, not addenda.
    const early = await tumourAndInfarct('CT');
    const other = await draft(early.scanId);
    expect((await t.request('POST', `/v1/reports/${other.id}/addenda`, { key: reader.key, body: { text: 'too early' } })).status).toBe(409);

    t.clock.advance(60_000);
    const firstAt = t.clock.now().toISOString();
    const first = await t.request('POST', `/v1/reports/${report.id}/addenda`, {
      key: reader.key,
      body: { text: 'On review with the DWI, the infarct is real.', findings: [{ id: s.infarct, review: 'accepted' }] },
    });
    expect(first.status).toBe(201);
    t.clock.advance(60_000);
    const second = await t.request('POST', `/v1/reports/${report.id}/addenda`, { key: reader.key, body: { text: 'Discussed with the stroke team.' } });
    expect(second.status).toBe(201);

    const shown = await getReport(report.id);
    expect(shown.addenda).toEqual([
      {
        id: expect.stringMatching(/^add_/),
        author: { id: reader.userId, email: 'reader@hospital.test' },
        created_at: firstAt,
        text: 'On review with the DWI, the infarct is real.',
        finding_changes: [{ finding_id: s.infarct, label: 'infarct_detected', from: 'rejected', to: 'accepted' }],
      },
      expect.objectContaining({ text: 'Discussed with the stroke team.', created_at: t.clock.now().toISOString(), finding_changes: [] }),
    ]);
    // The signed report is unchanged: its recommendation and its verdicts are what was signed.
    expect(shown).toMatchObject({ status: 'final', recommendation: signed.recommendation, findings: signed.findings, finalized_at: signed.finalized_at });
    // The scan's result shows the reader's current view.
    const result = await t.request('GET', `/v1/scans/${s.scanId}/results`, { headers: { 'API-Version': '1.1' } });
    expect(result.json.data.findings.find((f: { id: string }) => f.id === s.infarct).review).toBe('accepted');

    // In the exported text: CSV and XML of the report list.
    const csv = parseCsv((await t.request('GET', `/v1/reports?format=csv&scan_id=${s.scanId}`, { key: reader.key })).text);
    const header = csv[0]!;
    const row = csv.find((r) => r[0] === report.id)!;
    expect(row[header.indexOf('recommendation_basis')]).toBe('verdicts');
    expect(row[header.indexOf('addenda')]).toBe(
      `${firstAt} reader@hospital.test: On review with the DWI, the infarct is real. [verdicts: infarct_detected ${s.infarct}: rejected -> accepted]\n\n` +
        `${t.clock.now().toISOString()} reader@hospital.test: Discussed with the stroke team.`,
    );
    const xml = (await t.request('GET', `/v1/reports?format=xml&scan_id=${s.scanId}`, { key: reader.key })).text;
    expect(XMLValidator.validate(xml)).toBe(true);
    const doc = new XMLParser({ isArray: (name) => ['report', 'addendum', 'finding', 'finding_change'].includes(name), parseTagValue: false }).parse(xml);
    const root = Object.values(doc as Record<string, { reports?: { report: Array<{ id: string }> } }>).find((v) => typeof v === 'object' && v.reports)!;
    const xmlReport: any = root.reports!.report.find((r: { id: string }) => r.id === report.id);
    expect(xmlReport.addenda.addendum.map((a: { text: string }) => a.text)).toEqual(['On review with the DWI, the infarct is real.', 'Discussed with the stroke team.']);
    expect(xmlReport.addenda.addendum[0].finding_changes.finding_change[0]).toMatchObject({ finding_id: s.infarct, from: 'rejected', to: 'accepted' });

    // Audited with the patient and the verdicts it changed.
    const audit = await t.request('GET', `/v1/audit?action=reports.addendum&patient_id=${s.patientId}`);
    expect(audit.json.data.items.map((e: { target: string }) => e.target).sort()).toEqual(
      [`report:${report.id}`, `report:${report.id} findings:${s.infarct}:accepted`].sort(),
    );
    // Append-only in the store itself.
    await expect(t.server.services.db.run(`UPDATE report_addenda SET text = 'forged'`)).rejects.toThrow(/append-only/);
    await expect(t.server.services.db.run('DELETE FROM report_addenda')).rejects.toThrow(/append-only/);
  });

  it('refuses empty text, a finding of another report, and callers without write:reports', async () => {
    const s = await tumourAndInfarct('CT');
    const report = await draft(s.scanId);
    await finalize(report.id);
    const elsewhere = await tumourAndInfarct('CT');
    const post = (body: unknown, key = reader.key) => t.request('POST', `/v1/reports/${report.id}/addenda`, { key, body });
    expect((await post({ text: '   ' })).status).toBe(400);
    const foreign = await post({ text: 'x', findings: [{ id: elsewhere.tumour, review: 'accepted' }] });
    expect(foreign.status).toBe(400);
    expect(foreign.json.error.details).toContain(elsewhere.tumour);
    expect((await post({ text: 'x' }, (await t.keyFor('data_engineer')).key)).status).toBe(403);
    expect((await t.request('POST', '/v1/reports/rpt_nope/addenda', { key: reader.key, body: { text: 'x' } })).status).toBe(404);
    expect((await getReport(report.id)).addenda).toEqual([]);
  });
});
