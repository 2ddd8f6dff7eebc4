/**
 * One serializer per resource, feeding CSV and XML alike (JSON is the record itself). CSV
 * column orders are fixed and documented in docs/formats.md; never reorder, only append.
 */
import { mmUnit } from '#common/pixel-spacing.ts';
import type { ExportRecord, Report, ScanResultV11 } from '#server/api/schemas.ts';
import type { CsvCell } from '#server/formats/csv.ts';
import { maskArea } from '#common/rle-mask.ts';

export type ResourceSerializer<T> = {
  /** XML element holding the items, and the name of each item element. */
  collection: string;
  item: string;
  /** Element names for the items of nested arrays, by the array's key. */
  xmlItemNames: Readonly<Record<string, string>>;
  columns: readonly string[];
  csvRows(item: T): Record<string, CsvCell>[];
};

const XML_ITEM_NAMES = {
  findings: 'finding',
  scopes: 'scope',
  extra_scopes: 'scope',
  items: 'item',
  addenda: 'addendum',
  finding_changes: 'finding_change',
  lesions: 'lesion',
  finding_ids: 'finding_id',
  measurements: 'measurement',
  points: 'point',
  // A segmentation finding's mask runs (common/rle-mask.ts).
  counts: 'run',
};

/** A report's lesions as one CSV cell, one per line: "label: slices 4-6 of 20, largest 23.4 mm (accepted)". */
function lesionsCell(report: Report): string {
  return report.lesions
    .map((l) => {
      const slices = l.first_slice === null ? 'slice unknown' : l.first_slice === l.last_slice ? `slice ${l.first_slice}` : `slices ${l.first_slice}-${l.last_slice ?? ''}`;
      const of = l.slices === null ? '' : ` of ${l.slices}`;
      const size = l.largest_diameter_mm === null ? 'size unknown (no pixel spacing)' : `largest ${l.largest_diameter_mm} ${mmUnit(l.spacing_source)}`;
      return `${l.label}: ${slices}${of}, ${size} (${l.review ?? 'not reviewed'})`;
    })
    .join('\n');
}

/** A report's measurements as one CSV cell, one per line: "length 60.0 mm (image 1.2.3 frame 1)". */
function measurementsCell(report: Report): string {
  return report.measurements
    .map((m) => {
      const unit = m.unit ? ` ${m.unit}` : '';
      const mm = (v: number | null, what: string) => (v === null ? `${what} unknown (no pixel spacing)` : `${what} ${v.toFixed(1)}`);
      // Sizes from Imager Pixel Spacing are at the detector, and say so (common/pixel-spacing.ts).
      const text =
        m.kind === 'length'
          ? `${mm(m.length_mm, 'length')} ${mmUnit(m.pixel_spacing_source)}`
          : m.kind === 'probe'
            ? `value ${m.value === null ? 'unknown' : m.value.toFixed(1)}${unit}`
            : `${m.kind} ${mm(m.area_mm2, 'area')} ${mmUnit(m.pixel_spacing_source).replace('mm', 'mm2')}, mean ${m.mean === null ? 'unknown' : m.mean.toFixed(1)}${unit}, SD ${m.sd === null ? 'unknown' : m.sd.toFixed(1)}${unit}`;
      return `${text} (image ${m.instance_uid} frame ${m.frame + 1})`;
    })
    .join('\n');
}

/** A report's addenda as one CSV cell: each "time author: text" plus its verdict changes, a blank line apart. */
function addendaCell(report: Report): string {
  return report.addenda
    .map((a) => {
      const changes = a.finding_changes.map((c) =>
        c.added ? `${c.label} ${c.finding_id}: added by the reader, accepted` : `${c.label} ${c.finding_id}: ${c.from ?? 'not reviewed'} -> ${c.to ?? 'not reviewed'}`,
      );
      return `${a.created_at} ${a.author.email}: ${a.text}${changes.length === 0 ? '' : ` [verdicts: ${changes.join('; ')}]`}`;
    })
    .join('\n\n');
}

/** One row per finding; a scan without findings still gets one row, with empty finding cells,
 * so "analysed, nothing found" is distinguishable from "not analysed" in the file. */
export const scanResultSerializer: ResourceSerializer<ScanResultV11> = {
  collection: 'scan_results',
  item: 'scan_result',
  xmlItemNames: XML_ITEM_NAMES,
  columns: [
    'patient_id',
    'scan_id',
    'modality',
    'recommendation',
    'finding_index',
    'label',
    'confidence',
    'x',
    'y',
    'width',
    'height',
    'instance_uid',
    'frame',
    'review',
    'finding_id',
    'analysis_id',
    'model_id',
    'model_name',
    'model_version',
    'analysis_finished_at',
    'slice',
    'slices',
    'position_mm',
    'width_mm',
    'height_mm',
    'lesion_id',
    'source',
    'review_reason',
    'localization',
    'mask_area_px',
    'threshold',
    'operating_point',
  ],
  csvRows(result) {
    // Each row is one literal with every column, in column order: rows built by spreading a
    // shared part were dictionary-mode objects, and building them was 90% of a CSV page's
    // cost (500 results: 16 ms of 19 ms, against 1.1 ms for the whole JSON page).
    const analysis = result.analysis;
    if (result.findings.length === 0) {
      return [
        {
          patient_id: result.patient_id,
          scan_id: result.scan_id,
          modality: result.modality,
          recommendation: result.recommendation,
          finding_index: null,
          label: null,
          confidence: null,
          x: null,
          y: null,
          width: null,
          height: null,
          instance_uid: null,
          frame: null,
          review: null,
          finding_id: null,
          analysis_id: analysis.id,
          model_id: analysis.model.id,
          model_name: analysis.model.name,
          model_version: analysis.model.version,
          analysis_finished_at: analysis.finished_at,
          slice: null,
          slices: null,
          position_mm: null,
          width_mm: null,
          height_mm: null,
          lesion_id: null,
          source: null,
          review_reason: null,
          localization: null,
          mask_area_px: null,
          threshold: null,
          operating_point: analysis.operating_point ?? null,
        },
      ];
    }
    return result.findings.map((finding, index) => ({
      patient_id: result.patient_id,
      scan_id: result.scan_id,
      modality: result.modality,
      recommendation: result.recommendation,
      finding_index: index,
      label: finding.label,
      confidence: finding.confidence,
      x: finding.location.x,
      y: finding.location.y,
      width: finding.location.width,
      height: finding.location.height,
      instance_uid: finding.instance_uid,
      frame: finding.frame,
      review: finding.review,
      finding_id: finding.id,
      analysis_id: analysis.id,
      model_id: analysis.model.id,
      model_name: analysis.model.name,
      model_version: analysis.model.version,
      analysis_finished_at: analysis.finished_at,
      slice: finding.place?.slice ?? null,
      slices: finding.place?.slices ?? null,
      position_mm: finding.place?.position_mm ?? null,
      width_mm: finding.place?.width_mm ?? null,
      height_mm: finding.place?.height_mm ?? null,
      lesion_id: result.lesions.find((l) => l.finding_ids.includes(finding.id))?.id ?? null,
      source: finding.source ?? 'model',
      review_reason: finding.review_reason ?? null,
      // x/y/width/height of an 'image' finding are the whole key image, not a lesion's box.
      localization: finding.localization ?? 'box',
      // The mask itself is in the JSON and XML; a CSV cell says there is one, and its size.
      mask_area_px: finding.mask ? maskArea(finding.mask) : null,
      // What decided the finding: its label's threshold and the operating point it came from.
      threshold: finding.threshold ?? null,
      operating_point: finding.operating_point ?? null,
    }));
  },
};

export const reportSerializer: ResourceSerializer<Report> = {
  collection: 'reports',
  item: 'report',
  xmlItemNames: XML_ITEM_NAMES,
  columns: [
    'id',
    'scan_id',
    'patient_id',
    'modality',
    'status',
    'impression',
    'recommendation',
    'finding_count',
    'labels',
    'author_id',
    'author_email',
    'created_at',
    'updated_at',
    'finalized_at',
    'finalized_by',
    'analysis_id',
    'model_name',
    'model_version',
    'recommendation_basis',
    'addenda',
    'lesions',
    'measurements',
  ],
  csvRows(report) {
    return [
      {
        id: report.id,
        scan_id: report.scan_id,
        patient_id: report.patient_id,
        modality: report.modality,
        status: report.status,
        impression: report.impression,
        recommendation: report.recommendation,
        finding_count: report.findings.length,
        labels: [...new Set(report.findings.map((f) => f.label))].join(';'),
        author_id: report.author.id,
        author_email: report.author.email,
        created_at: report.created_at,
        updated_at: report.updated_at,
        finalized_at: report.finalized_at,
        finalized_by: report.finalized_by,
        analysis_id: report.analysis?.id ?? null,
        model_name: report.analysis?.model_name ?? null,
        model_version: report.analysis?.model_version ?? null,
        recommendation_basis: report.recommendation_basis,
        addenda: addendaCell(report),
        lesions: lesionsCell(report),
        measurements: measurementsCell(report),
      },
    ];
  },
};

export const exportSerializer: ResourceSerializer<ExportRecord> = {
  collection: 'exports',
  item: 'export',
  xmlItemNames: XML_ITEM_NAMES,
  columns: ['id', 'format', 'deidentified', 'status', 'row_count', 'size_bytes', 'sha256', 'created_by', 'created_at', 'download_url', 'filters'],
  csvRows(record) {
    return [
      {
        id: record.id,
        format: record.format,
        deidentified: record.deidentified,
        status: record.status,
        row_count: record.row_count,
        size_bytes: record.size_bytes,
        sha256: record.sha256,
        created_by: record.created_by,
        created_at: record.created_at,
        download_url: record.download_url,
        filters: JSON.stringify(record.filters),
      },
    ];
  },
};
