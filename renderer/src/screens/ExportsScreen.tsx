export function ExportsScreen() {
  return <section>todo</section>;
}
