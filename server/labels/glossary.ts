/**
 * The label glossary served at GET /v1/labels (spec 2.7 refers to one). Until model manifests
 * are installed this is the vocabulary of the bundled model; codes are SNOMED CT concepts.
 */
import type { Label } from '#server/api/schemas.ts';

export const BUILTIN_LABELS: readonly Label[] = [
  {
    label: 'tumor_detected',
    display_name: 'Tumour',
    definition: 'A space-occupying mass consistent with a neoplasm, solid or with an enhancing rim.',
    code: { system: 'SNOMED CT', value: '126952004', meaning: 'Neoplasm of brain' },
  },
  {
    label: 'hemorrhage_detected',
    display_name: 'Haemorrhage',
    definition: 'Intracranial blood: a hyperdense collection on CT or a corresponding signal change on MR.',
    code: { system: 'SNOMED CT', value: '1386000', meaning: 'Intracranial hemorrhage' },
  },
  {
    label: 'infarct_detected',
    display_name: 'Infarct',
    definition: 'A territory of ischaemic tissue damage: hypodense on CT, hyperintense on diffusion or T2 MR.',
    code: { system: 'SNOMED CT', value: '432504007', meaning: 'Cerebral infarction' },
  },
];
