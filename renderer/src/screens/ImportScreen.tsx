export function ImportScreen() {
  return <section>todo</section>;
}
