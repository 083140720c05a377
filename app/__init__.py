from app.pure import install

install()
