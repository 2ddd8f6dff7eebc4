/** Shown on every screen: the bundled model is trained on synthetic phantoms (PRODUCT.md, The model). */
export function ClinicalBanner() {
  return (
    <div className="clinical-banner" role="note" data-testid="clinical-banner">
      NOT FOR CLINICAL USE — the bundled AI model is trained on synthetic phantoms. Findings are research output, not a diagnosis.
    </div>
  );
}

export function ModelTag({ name, version }: { name: string; version: string }) {
  return (
    <span className="model-tag" data-testid="model-tag" title="Model that produced this result">
      {name} v{version} · not for clinical use
    </span>
  );
}
